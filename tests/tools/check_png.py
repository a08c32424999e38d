"""Checks a PNG written by `pagedattn serve --plot` with Python's zlib as the independent decoder.

  python3 check_png.py FILE.png
Every chunk's CRC, IHDR (8-bit RGB, no interlace), the IDAT stream inflated by zlib (which checks
the Adler-32 too) to exactly height rows of 1 + 3 * width bytes with filter 0, and a plot's
content: a white background with ink, grid lines and at least one series colour on it. Exit 0 when all hold.
"""
import struct
import sys
import zlib
from collections import Counter


def main(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"CRC of {kind}"
        chunks.append((kind, body))
        pos += 12 + length
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"], [k for k, _ in chunks]
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, interlace) == (8, 2, 0), (depth, colour, interlace)
    raw = zlib.decompress(chunks[1][1])
    stride = 1 + 3 * width
    assert len(raw) == height * stride, (len(raw), height, stride)
    assert all(raw[y * stride] == 0 for y in range(height)), "filter bytes"
    pixels = Counter(raw[y * stride + 1 + 3 * x:y * stride + 4 + 3 * x]
                     for y in range(height) for x in range(width))
    assert pixels.most_common(1)[0][0] == b"\xff\xff\xff", "a white background"
    assert len(pixels) >= 4, "ink, grid lines and at least one series on it"
    print(f"{path}: {width}x{height}, {len(data)} bytes for {len(raw)} of pixels, {len(pixels)} colours")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""Whether two builds of a CUDA object hold the same machine code, without a GPU or cuobjdump: the
cubins embedded in each object's .nv_fatbin section are compared kernel by kernel (.text.<kernel>
sections). For refactors that must not change a kernel: rename, move, host-only edits.

Usage: scripts/compare_sass.py OLD.o NEW.o   (exit 0 when every kernel's code is identical)
"""
import struct
import subprocess
import sys
import tempfile


def fatbin(obj):
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out.name], check=True)
        return open(out.name, "rb").read()


def cubins(blob):
    """The ELF images in a fatbin, each cut at the end of its section header table."""
    found, at = [], blob.find(b"\x7fELF")
    while at >= 0:
        shoff, = struct.unpack_from("<Q", blob, at + 0x28)
        shentsize, shnum = struct.unpack_from("<HH", blob, at + 0x3A)
        end = at + shoff + shentsize * shnum
        found.append(blob[at:end])
        at = blob.find(b"\x7fELF", end)
    return found


def kernels(elf):
    """{section name: bytes} of the .text.* sections of one cubin."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    header = lambda k: struct.unpack_from("<IIQQQQ", elf, shoff + k * shentsize)
    names_off, names_size = header(shstrndx)[4:6]
    names = elf[names_off:names_off + names_size]
    code = {}
    for k in range(shnum):
        name_at, _, _, _, off, size = header(k)
        name = names[name_at:names.index(b"\0", name_at)].decode()
        if name.startswith(".text."):
            code[name] = elf[off:off + size]
    return code


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old = [kernels(e) for e in cubins(fatbin(sys.argv[1]))]
    new = [kernels(e) for e in cubins(fatbin(sys.argv[2]))]
    same = len(old) == len(new)
    for a, b in zip(old, new):
        differ = sorted(n for n in a.keys() & b.keys() if a[n] != b[n])
        print("kernels: %d old, %d new, %d identical, %d differ, %d only old, %d only new" % (
            len(a), len(b), len(a.keys() & b.keys()) - len(differ), len(differ), len(a.keys() - b.keys()),
            len(b.keys() - a.keys())))
        for name in differ:
            print("  differs:", name)
        same = same and not differ and a.keys() == b.keys()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

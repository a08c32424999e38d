// A small zlib stream writer (RFC 1950 around RFC 1951): one deflate block with the fixed Huffman
// codes and greedy LZ77 matches found through a hash of the next 3 bytes. Plots are long runs of
// one colour and rows like the row above, which this finds (~30x smaller than stored blocks).
#pragma once

#include <cstdint>
#include <vector>

namespace pagedattn::serve {

std::vector<uint8_t> zlib_compress(const std::vector<uint8_t>& raw);

}  // namespace pagedattn::serve

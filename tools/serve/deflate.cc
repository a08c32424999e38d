// zlib_compress (see deflate.h). Code and table names follow RFC 1951, section 3.2.
#include "serve/deflate.h"

#include <algorithm>
#include <array>

namespace pagedattn::serve {
namespace {

constexpr int kWindow = 32768, kMinMatch = 3, kMaxMatch = 258, kHashBits = 15;
constexpr std::array<int, 29> kLengthBase = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
                                             15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
                                             67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<int, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<int, 30> kDistBase = {1,    2,    3,    4,    5,    7,     9,     13,
                                           17,   25,   33,   49,   65,   97,    129,   193,
                                           257,  385,  513,  769,  1025, 1537,  2049,  3073,
                                           4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<int, 30> kDistExtra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                            6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

class BitWriter {
 public:
  explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}
  void bits(uint32_t value, int n) {  // least significant bit first
    for (int i = 0; i < n; ++i) push((value >> i) & 1);
  }
  void huffman(uint32_t code, int n) {  // Huffman codes go most significant bit first
    for (int i = n - 1; i >= 0; --i) push((code >> i) & 1);
  }
  void flush() {
    if (used_ > 0) out_.push_back(acc_);
    acc_ = 0;
    used_ = 0;
  }

 private:
  void push(uint32_t bit) {
    acc_ |= static_cast<uint8_t>(bit << used_);
    if (++used_ == 8) flush();
  }
  std::vector<uint8_t>& out_;
  uint8_t acc_ = 0;
  int used_ = 0;
};

// The fixed literal/length code of `symbol` (0-287).
void literal_length(BitWriter& w, int symbol) {
  if (symbol < 144) w.huffman(0x30 + symbol, 8);
  else if (symbol < 256) w.huffman(0x190 + symbol - 144, 9);
  else if (symbol < 280) w.huffman(symbol - 256, 7);
  else w.huffman(0xC0 + symbol - 280, 8);
}

void match(BitWriter& w, int length, int distance) {
  const int l = static_cast<int>(std::upper_bound(kLengthBase.begin(), kLengthBase.end(), length) -
                                 kLengthBase.begin()) - 1;
  literal_length(w, 257 + l);
  w.bits(length - kLengthBase[l], kLengthExtra[l]);
  const int d = static_cast<int>(std::upper_bound(kDistBase.begin(), kDistBase.end(), distance) -
                                 kDistBase.begin()) - 1;
  w.huffman(d, 5);  // the fixed distance codes are 5-bit numbers
  w.bits(distance - kDistBase[d], kDistExtra[d]);
}

uint32_t hash3(const uint8_t* p) {
  return ((uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]) * 2654435761u) >> (32 - kHashBits);
}

uint32_t adler32(const std::vector<uint8_t>& raw) {
  uint32_t a = 1, b = 0;
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

}  // namespace

std::vector<uint8_t> zlib_compress(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> out = {0x78, 0x01};  // deflate, 32 KiB window, no dictionary
  BitWriter w(out);
  w.bits(1, 1);  // BFINAL
  w.bits(1, 2);  // BTYPE 01: fixed Huffman codes
  std::vector<int> last(size_t{1} << kHashBits, -1);  // latest position of each 3-byte hash
  const int n = static_cast<int>(raw.size());
  for (int i = 0; i < n;) {
    int length = 0, distance = 0;
    if (i + kMinMatch <= n) {
      const uint32_t h = hash3(&raw[i]);
      const int candidate = last[h];
      last[h] = i;
      if (candidate >= 0 && i - candidate <= kWindow) {
        const int limit = std::min(kMaxMatch, n - i);
        while (length < limit && raw[candidate + length] == raw[i + length]) ++length;
        distance = i - candidate;
      }
    }
    if (length >= kMinMatch) {
      match(w, length, distance);
      for (int k = 1; k < length && i + k + kMinMatch <= n; ++k) last[hash3(&raw[i + k])] = i + k;
      i += length;
    } else {
      literal_length(w, raw[i]);
      ++i;
    }
  }
  literal_length(w, 256);  // end of block
  w.flush();
  const uint32_t check = adler32(raw);
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(check >> s));
  return out;
}

}  // namespace pagedattn::serve

// A PNG writer with no dependencies: 8-bit RGB, rows filtered with "none", compressed by the small
// deflate writer of deflate.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagedattn/status.h"

namespace pagedattn::serve {

// rgb: width * height * 3 bytes, rows top to bottom.
std::vector<uint8_t> encode_png(int width, int height, const std::vector<uint8_t>& rgb);
Status write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace pagedattn::serve

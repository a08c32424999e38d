// A small RGB raster for plots: lines, filled rectangles and text in a built-in 5x7 font
// (digits, capital letters, which lower case maps to, and . , _ - ( ) / : %).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagedattn::serve {

struct Color {
  uint8_t r, g, b;
};

class Canvas {
 public:
  Canvas(int width, int height, Color background);
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }

  void pixel(int x, int y, Color c);
  void line(int x0, int y0, int x1, int y1, Color c);
  void rect(int x, int y, int w, int h, Color c);
  // Text with its top-left corner at (x, y); each glyph 6 * scale pixels wide.
  void text(int x, int y, const std::string& s, Color c, int scale = 1);
  static int text_width(const std::string& s, int scale = 1) {
    return static_cast<int>(s.size()) * 6 * scale;
  }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

}  // namespace pagedattn::serve

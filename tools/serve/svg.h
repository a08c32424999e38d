// An SVG document written as text: shapes with their attributes, and text as <text> (escaped), so
// that any browser or viewer renders it with its own fonts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pagedattn::serve {

// `attributes` are written as given, e.g. R"(stroke="#888" stroke-width="1")".
class Svg {
 public:
  Svg(int width, int height);
  void line(double x1, double y1, double x2, double y2, const std::string& attributes);
  void polyline(const std::vector<std::pair<double, double>>& points,
                const std::string& attributes);
  void rect(double x, double y, double w, double h, const std::string& attributes);
  void circle(double cx, double cy, double r, const std::string& attributes);
  void polygon(const std::vector<std::pair<double, double>>& points, const std::string& attributes);
  void text(double x, double y, const std::string& content, const std::string& attributes);
  // The whole document, with its closing tag.
  std::string str() const;

 private:
  int width_, height_;
  std::string body_;
};

// &, <, > and " as entities.
std::string svg_escape(const std::string& text);

}  // namespace pagedattn::serve

// Svg: each call appends one element; coordinates with one decimal keep the file small.
#include "serve/svg.h"

#include <cstdio>

namespace pagedattn::serve {
namespace {

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

std::string points_text(const std::vector<std::pair<double, double>>& points) {
  std::string out;
  for (const auto& [x, y] : points) {
    if (!out.empty()) out += ' ';
    out += num(x) + "," + num(y);
  }
  return out;
}

}  // namespace

Svg::Svg(int width, int height) : width_(width), height_(height) {}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& attributes) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\" " + attributes + "/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points,
                   const std::string& attributes) {
  body_ += "<polyline points=\"" + points_text(points) + "\" fill=\"none\" " + attributes + "/>\n";
}

void Svg::rect(double x, double y, double w, double h, const std::string& attributes) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
           num(h) + "\" " + attributes + "/>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& attributes) {
  body_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" " +
           attributes + "/>\n";
}

void Svg::polygon(const std::vector<std::pair<double, double>>& points,
                  const std::string& attributes) {
  body_ += "<polygon points=\"" + points_text(points) + "\" " + attributes + "/>\n";
}

void Svg::text(double x, double y, const std::string& content, const std::string& attributes) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + attributes + ">" +
           svg_escape(content) + "</text>\n";
}

std::string Svg::str() const {
  const std::string w = std::to_string(width_), h = std::to_string(height_);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n" +
         body_ + "</svg>\n";
}

std::string svg_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace pagedattn::serve

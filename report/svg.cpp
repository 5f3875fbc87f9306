#include "svg.h"

#include "attn_oracle/report/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ao::svg {


std::string num(double x) {
  if (!std::isfinite(x)) return "0";
  double r = std::round(x * 100.0) / 100.0;
  if (r == 0) return "0";
  std::string s = fmt::format("{:.2f}", r);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

Rgb hex(const char* s) {
  unsigned v = 0;
  for (int i = 1; i <= 6; ++i) {
    char c = s[i];
    v = v * 16 + unsigned(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
  }
  return {double((v >> 16) & 255), double((v >> 8) & 255), double(v & 255)};
}

std::string css(Rgb c) {
  auto b = [](double x) { return int(std::clamp(std::lround(x), 0L, 255L)); };
  return fmt::format("#{:02x}{:02x}{:02x}", b(c.r), b(c.g), b(c.b));
}

Rgb mix(Rgb a, Rgb b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

Rgb ramp(const std::vector<Rgb>& stops, double t) {
  if (stops.size() == 1) return stops[0];
  t = std::clamp(t, 0.0, 1.0) * double(stops.size() - 1);
  size_t i = std::min(size_t(t), stops.size() - 2);
  return mix(stops[i], stops[i + 1], t - double(i));
}

std::string doc_colour(int doc) {
  static const char* c[] = {"#4e79a7", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#9c755f", "#86bcb6", "#d4a6c8"};
  return c[size_t(doc) % 8];
}

std::string doc_letter(int doc) {
  std::string s;
  int d = doc;
  do {
    s.insert(s.begin(), char('a' + d % 26));
    d = d / 26 - 1;
  } while (d >= 0);
  return s;
}

Bins make_bins(int64_t n, int64_t max_bins) {
  Bins b;
  b.n = n;
  b.per = n <= max_bins ? 1 : (n + max_bins - 1) / max_bins;
  return b;
}

void CellRuns::add_span(int64_t row, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) cols_[size_t(row)].push_back(c);
}

void CellRuns::sort() const {
  if (sorted_) return;
  auto& self = const_cast<std::vector<std::vector<int64_t>>&>(cols_);
  for (auto& v : self) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  sorted_ = true;
}

size_t CellRuns::runs() const {
  sort();
  size_t n = 0;
  for (const auto& v : cols_)
    for (size_t i = 0; i < v.size(); ++i) n += (i == 0 || v[i] != v[i - 1] + 1);
  return n;
}

std::string CellRuns::path_data() const {
  sort();
  std::string d;
  for (size_t r = 0; r < cols_.size(); ++r) {
    const auto& v = cols_[r];
    for (size_t i = 0; i < v.size();) {
      size_t j = i + 1;
      while (j < v.size() && v[j] == v[j - 1] + 1) ++j;
      d += fmt::format("M{} {}.5h{}", v[i], r, j - i);
      i = j;
    }
  }
  return d;
}

std::string runs_path(const CellRuns& runs, const std::string& colour, const std::string& extra) {
  std::string d = runs.path_data();
  if (d.empty()) return {};
  return fmt::format("<path d=\"{}\" stroke=\"{}\" stroke-width=\"1\" fill=\"none\"{}{}/>", d, colour,
                     extra.empty() ? "" : " ", extra);
}

std::string text(double x, double y, const std::string& s, const std::string& cls, const char* anchor) {
  return fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>", num(x), num(y),
                     cls.empty() ? "" : fmt::format(" class=\"{}\"", cls),
                     std::string(anchor) == "start" ? "" : fmt::format(" text-anchor=\"{}\"", anchor), xml_escape(s));
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" {}/>", num(x), num(y),
                     num(std::max(w, 0.0)), num(std::max(h, 0.0)), attrs);
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>", num(x1), num(y1), num(x2), num(y2), attrs);
}

std::string hatch_defs(const std::string& p) {
  return fmt::format(
      "<defs>"
      "<pattern id=\"{0}pad\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      "<rect width=\"6\" height=\"6\" fill=\"#eceff3\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#a0a7b1\" stroke-width=\"2\"/></pattern>"
      "<pattern id=\"{0}cap\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
      "<rect width=\"6\" height=\"6\" fill=\"#d5d9df\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#6b7280\" stroke-width=\"2\"/></pattern>"
      "<pattern id=\"{0}clob\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      "<rect width=\"6\" height=\"6\" fill=\"#fb923c\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#111827\" stroke-width=\"2.5\"/></pattern>"
      "<pattern id=\"{0}unchk\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\">"
      "<rect width=\"4\" height=\"4\" fill=\"#ffffff\"/><rect width=\"2\" height=\"2\" fill=\"#e5e7eb\"/></pattern>"
      "</defs>",
      p);
}

double legend_item(std::string& out, double x, double y, const std::string& fill, const std::string& label,
                   const std::string& stroke) {
  out += rect(x, y - 9, 12, 12,
              fmt::format("fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"", fill, stroke.empty() ? "#6b7280" : stroke,
                          stroke.empty() ? "0.5" : "2"));
  out += text(x + 16, y + 1, label, "lg");
  return 16 + 6.2 * double(label.size()) + 14;
}

void Legend::add(const std::string& fill, const std::string& label, const std::string& stroke) {
  const double w = 16 + 6.2 * double(label.size()) + 14;
  if (x_ > x0_ && x_ + w > xmax_) {
    x_ = x0_;
    y_ += 18;
  }
  x_ += legend_item(out_, x_, y_, fill, label, stroke);
}

}  // namespace ao::svg

// Small SVG building blocks for the report pictures (escaping: xml_escape in report.h): compact numbers, colours, binning of
// long axes, and CellRuns, which draws a set of grid cells as horizontal runs in one <path>, so a
// map of 100k cells costs a few hundred kB instead of megabytes of <rect>s.
#pragma once
#include "attn_oracle/report/report.h"
#include <cstdint>
#include <string>
#include <vector>

namespace ao::svg {


std::string num(double x);              // at most 2 decimals, no trailing zeros, never "-0"

struct Rgb { double r, g, b; };
Rgb hex(const char* s);                 // "#rrggbb"
std::string css(Rgb c);                 // "#rrggbb"
Rgb mix(Rgb a, Rgb b, double t);        // t in [0, 1]
// Interpolates a ramp of stops at t in [0, 1].
Rgb ramp(const std::vector<Rgb>& stops, double t);

// Categorical colours for documents (index wraps around).
std::string doc_colour(int doc);
// Letters used for a document's tokens in small strips (TE's notation: a, b, c, ...).
std::string doc_letter(int doc);

// Maps [0, n) onto bins of `per` items each; exact (per = 1) when n <= max_bins.
struct Bins {
  int64_t n = 0, per = 1;
  int64_t count() const { return n == 0 ? 0 : (n + per - 1) / per; }
  int64_t of(int64_t i) const { return i / per; }
  bool exact() const { return per == 1; }
};
Bins make_bins(int64_t n, int64_t max_bins);

// Cells (row, col) on an integer grid, emitted as horizontal strokes of height 1 in grid units
// (draw inside a transform that scales grid units to pixels).
class CellRuns {
 public:
  explicit CellRuns(int64_t rows) : cols_(size_t(rows)) {}
  void add(int64_t row, int64_t col) { cols_[size_t(row)].push_back(col); }
  void add_span(int64_t row, int64_t c0, int64_t c1);  // [c0, c1)
  size_t runs() const;                               // runs after merging (cost estimate)
  std::string path_data() const;                      // "M c r h len ..." (rows at r + 0.5)
 private:
  std::vector<std::vector<int64_t>> cols_;
  mutable bool sorted_ = false;
  void sort() const;
};

// <path> of the runs, stroked with `colour` at one grid unit of thickness.
std::string runs_path(const CellRuns& runs, const std::string& colour, const std::string& extra = "");

// <text> with escaping; anchor "start" | "middle" | "end".
std::string text(double x, double y, const std::string& s, const std::string& cls = "", const char* anchor = "start");
std::string rect(double x, double y, double w, double h, const std::string& attrs);
std::string line(double x1, double y1, double x2, double y2, const std::string& attrs);

// <defs> with the hatch patterns every picture uses: "pad" (grey, untouched pad slot), "cap"
// (darker, capacity past the last sequence), "clob" (orange + black, a pad slot that was written),
// "unchk" (rows not checked). Each <svg> carries its own copy (ids are prefixed to stay unique).
std::string hatch_defs(const std::string& prefix);

// A horizontal legend entry (swatch + label) at (x, y); returns its width in px.
double legend_item(std::string& out, double x, double y, const std::string& fill, const std::string& label,
                   const std::string& stroke = "");

// Legend entries laid out left to right from (x0, y), wrapping to a new line past x_max.
class Legend {
 public:
  Legend(std::string& out, double x0, double y, double x_max) : out_(out), x0_(x0), x_(x0), y_(y), xmax_(x_max) {}
  void add(const std::string& fill, const std::string& label, const std::string& stroke = "");
  double bottom() const { return y_ + 8; }  // below the last line
 private:
  std::string& out_;
  double x0_, x_, y_, xmax_;
};

}  // namespace ao::svg

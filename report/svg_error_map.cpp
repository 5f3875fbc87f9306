// Error map of SDPA (see svg_pictures.h): x = O (and stats) buffer rows, y = query heads.
// Cell value: O: max_e |B - R| / max(max_e |R|, atol) over the head's dim_v elements (relative error,
// floored so rows whose reference is ~0 do not blow up); LSE: |B - R| (absolute, as the gate uses).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "attn_oracle/compare/compare.h"
#include "svg.h"
#include "svg_pictures.h"

namespace ao {

namespace {

// Cell states, ordered by how much they matter when a binned cell covers several.
enum State : uint8_t { kNone, kNotChecked, kPad, kErr, kClobbered, kUnwritten, kNaN };

struct Cell {
  State st = kNone;
  double err = 0;
  void merge(const Cell& c) {
    if (c.st > st) st = c.st;
    if (c.st == kErr || st == kErr) err = std::max(err, c.err);
  }
};

constexpr double kLeft = 200, kMaxW = 900;

const char* const kNaNColour = "#d946ef";
const char* const kUnwrittenColour = "#1f2937";

// Quantised log colour scale: greens up to the tolerance, oranges to dark red above it.
std::string err_colour(double v, double tol) {
  static const std::vector<svg::Rgb> good = {svg::hex("#f3faf2"), svg::hex("#c7e9c0"), svg::hex("#74c476")};
  static const std::vector<svg::Rgb> bad = {svg::hex("#fdae6b"), svg::hex("#e6550d"), svg::hex("#a50f15"), svg::hex("#4a0009")};
  const double lt = std::log10(tol);
  if (!(v > tol)) {
    const double t = v > 0 ? (std::log10(v) + 7.0) / (lt + 7.0) : 0.0;
    return svg::css(svg::ramp(good, std::floor(std::clamp(t, 0.0, 1.0) * 6) / 6));
  }
  const double t = (std::log10(v) - lt) / (1.0 - lt);
  return svg::css(svg::ramp(bad, std::floor(std::clamp(t, 0.0, 1.0) * 8) / 8));
}

struct Rows {
  // Per buffer row: the Q row whose output lives there (-1: pad slot), whether it was checked.
  std::vector<int64_t> owner;
  std::vector<char> checked;
};

Rows owners(const Layout& l, bool stats) {
  Rows r;
  const int64_t n = stats ? l.stats_rows : l.o_rows;
  r.owner.assign(size_t(n), -1);
  r.checked.assign(size_t(n), 0);
  std::vector<char> chk(size_t(l.q_rows), 0);
  for (int64_t q : l.check_rows) chk[size_t(q)] = 1;
  for_each_valid_row(l, stats ? RowBuffer::Stats : RowBuffer::O, [&](int64_t q, int64_t b) {
    r.owner[size_t(b)] = q;
    r.checked[size_t(b)] = chk[size_t(q)];
  });
  return r;
}

// Exact cells: [rows][heads].
std::vector<Cell> o_cells(const CaseArtifacts& a, const Rows& rows, double atol) {
  const Layout& l = a.layout;
  const int Hq = l.c.hq, Dv = l.c.dim_v;
  std::vector<Cell> cells(size_t(l.o_rows) * size_t(Hq));
  for (int64_t r = 0; r < l.o_rows; ++r)
    for (int h = 0; h < Hq; ++h) {
      Cell& c = cells[size_t(r) * size_t(Hq) + size_t(h)];
      const float* g = a.got.o.data() + (r * Hq + h) * Dv;
      const float* x = a.ref.o.data() + (r * Hq + h) * Dv;
      if (rows.owner[size_t(r)] < 0) {
        bool written = false;
        for (int e = 0; e < Dv && !written; ++e) written = !is_sentinel(g[e]);
        c.st = written ? kClobbered : kPad;
        continue;
      }
      if (!rows.checked[size_t(r)]) { c.st = kNotChecked; continue; }
      bool unw = false, nan = false;
      double d = 0, m = 0;
      for (int e = 0; e < Dv; ++e) {
        if (is_sentinel(g[e])) { unw = true; continue; }
        if (!std::isfinite(g[e])) { nan = true; continue; }
        d = std::max(d, std::fabs(double(g[e]) - double(x[e])));
        m = std::max(m, std::fabs(double(x[e])));
      }
      c.st = nan ? kNaN : unw ? kUnwritten : kErr;
      c.err = d / std::max(m, atol);
    }
  return cells;
}

std::vector<Cell> lse_cells(const CaseArtifacts& a, const Rows& rows) {
  const Layout& l = a.layout;
  const int Hq = l.c.hq;
  std::vector<Cell> cells(size_t(l.stats_rows) * size_t(Hq));
  for (int64_t r = 0; r < l.stats_rows; ++r)
    for (int h = 0; h < Hq; ++h) {
      Cell& c = cells[size_t(r) * size_t(Hq) + size_t(h)];
      const float g = a.got.lse[size_t(r * Hq + h)], x = a.ref.lse[size_t(r * Hq + h)];
      if (rows.owner[size_t(r)] < 0) { c.st = is_sentinel(g) ? kPad : kClobbered; continue; }
      if (!rows.checked[size_t(r)]) { c.st = kNotChecked; continue; }
      if (is_sentinel(g)) { c.st = kUnwritten; continue; }
      if (std::isinf(x) && x < 0) {
        c.st = kErr;
        c.err = std::isinf(g) && g < 0 ? 0 : INFINITY;
        continue;
      }
      if (!std::isfinite(g)) { c.st = kNaN; continue; }
      c.st = kErr;
      c.err = std::fabs(double(g) - double(x));
    }
  return cells;
}

// Draws a rows x heads map at (x0, y0); returns its height.
double draw_map(std::string& o, const std::string& id, const std::vector<Cell>& cells, int64_t nrows, int H,
                const svg::Bins& rb, const svg::Bins& hb, double sx, double sy, double y0, double tol,
                const std::string& label, std::vector<Cell>& row_worst) {
  const int64_t R = rb.count(), Hb = hb.count();
  std::vector<Cell> bin(size_t(R * Hb));
  for (int64_t r = 0; r < nrows; ++r)
    for (int h = 0; h < H; ++h) {
      const Cell& c = cells[size_t(r) * size_t(H) + size_t(h)];
      bin[size_t(rb.of(r) * Hb + hb.of(h))].merge(c);
      row_worst[size_t(rb.of(r))].merge(c);
    }
  // Colour layers as runs along x (one run set per head-bin row), patterns as pixel rects.
  std::map<std::string, svg::CellRuns> layers;
  auto colour_of = [&](const Cell& c) -> std::string {
    switch (c.st) {
      case kNaN: return kNaNColour;
      case kUnwritten: return kUnwrittenColour;
      case kErr: return std::isinf(c.err) ? "#4a0009" : err_colour(c.err, tol);
      default: return {};
    }
  };
  std::string pat;
  for (int64_t hbin = 0; hbin < Hb; ++hbin) {
    for (int64_t r = 0; r < R;) {
      const Cell& c = bin[size_t(r * Hb + hbin)];
      const std::string col = colour_of(c);
      if (!col.empty()) {
        layers.try_emplace(col, Hb).first->second.add(hbin, r);
        ++r;
        continue;
      }
      int64_t e = r + 1;
      while (e < R && bin[size_t(e * Hb + hbin)].st == c.st) ++e;
      const char* p = c.st == kPad ? "pad" : c.st == kClobbered ? "clob" : c.st == kNotChecked ? "unchk" : nullptr;
      if (p)
        pat += svg::rect(kLeft + double(r) * sx, y0 + double(hbin) * sy, double(e - r) * sx, sy,
                         fmt::format("fill=\"url(#{}{})\"", id, p));
      r = e;
    }
  }
  // Runs are along x, so the CellRuns "row" is the head bin and the "column" is the buffer row.
  o += fmt::format("<g transform=\"translate({} {}) scale({:.6g} {:.6g})\" shape-rendering=\"crispEdges\">",
                   svg::num(kLeft), svg::num(y0), sx, sy);
  for (const auto& [col, runs] : layers) o += svg::runs_path(runs, col);
  o += "</g>";
  o += pat;
  if (sx >= 8)
    for (int64_t r = 1; r < R; ++r)
      o += svg::line(kLeft + double(r) * sx, y0, kLeft + double(r) * sx, y0 + double(Hb) * sy,
                     "stroke=\"#ffffff\" stroke-width=\"1\"");
  if (sy >= 8)
    for (int64_t h = 1; h < Hb; ++h)
      o += svg::line(kLeft, y0 + double(h) * sy, kLeft + double(R) * sx, y0 + double(h) * sy,
                     "stroke=\"#ffffff\" stroke-width=\"1\"");
  o += svg::rect(kLeft, y0, double(R) * sx, double(Hb) * sy, "fill=\"none\" stroke=\"#374151\" stroke-width=\"1\"");
  o += svg::text(kLeft - 36, y0 + double(Hb) * sy / 2 + 4, label, "bl", "end");
  for (int64_t h = 0; h < Hb; ++h) {
    if (sy < 9 && h != 0 && h != Hb - 1) continue;
    const std::string s = hb.exact() ? fmt::format("h{}", h) : fmt::format("h{}–{}", h * hb.per, std::min<int64_t>(H, (h + 1) * hb.per) - 1);
    o += svg::text(kLeft - 4, y0 + (double(h) + 0.5) * sy + 3.5, s, "tk", "end");
  }
  return double(Hb) * sy;
}


// CellMap::State (the comparator's judgement) as the map's cell state.
constexpr State kStateOf[] = {kNotChecked, kPad, kErr, kClobbered, kUnwritten, kNaN};
static_assert(CellMap::NonFinite == 5 && sizeof(kStateOf) == 6);

// The x axis every map of one buffer shares: buffer rows binned into columns of sx pixels.
struct RowAxis {
  svg::Bins rb;
  double sx = 0, W = 0;
  explicit RowAxis(int64_t n) : rb(svg::make_bins(n, 600)), sx(std::min(kMaxW / double(std::max<int64_t>(rb.count(), 1)), 56.0)),
                       W(double(rb.count()) * sx) {}
  double x(int64_t row) const { return kLeft + double(row) / double(rb.per) * sx; }
};

// A buffer's layout as a bar on the axis: pad slots hatched, each span [r0, r1) in its document's colour
// (dashed and translucent when `packed`: where a kernel deriving offsets from the lengths puts it).
struct Span {
  int64_t r0, r1;
  int doc;
};
void layout_band(std::string& o, const std::string& id, const RowAxis& ax, double& y, const std::string& label,
                 const std::string& sub, const std::vector<Span>& spans, bool packed) {
  o += svg::text(kLeft - 10, y + 10, label, "bl", "end");
  if (!sub.empty()) o += svg::text(kLeft - 10, y + 22, sub, "bs", "end");
  o += svg::rect(kLeft, y, ax.W, 18, fmt::format("fill=\"url(#{}pad)\"", id));
  for (const Span& sp : spans) {
    const double x0 = ax.x(sp.r0), x1 = ax.x(sp.r1);
    o += svg::rect(x0, y, x1 - x0, 18,
                   packed ? fmt::format("fill=\"{0}\" fill-opacity=\"0.35\" stroke=\"{0}\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"",
                                        svg::doc_colour(sp.doc))
                          : fmt::format("fill=\"{}\"", svg::doc_colour(sp.doc)));
    if (ax.rb.exact() && ax.sx >= 9)
      for (int64_t r = sp.r0; r < sp.r1; ++r)
        o += svg::text(kLeft + (double(r) + 0.5) * ax.sx, y + 13, svg::doc_letter(sp.doc), packed ? "cp" : "cl", "middle");
  }
  o += svg::rect(kLeft, y, ax.W, 18, "fill=\"none\" stroke=\"#374151\" stroke-width=\"1\"");
  y += 30;
}

// One verdict cell per column (worst over the maps above it); hover text names the row (who(r)) and
// what went wrong. `bad`: the error above which a judged cell is wrong.
void row_verdicts(std::string& o, const std::string& id, const RowAxis& ax, double& y, const std::vector<Cell>& row_worst,
                  double bad, const char* err_word, const std::function<std::string(int64_t)>& who) {
  o += svg::text(kLeft - 10, y + 10, "row verdict", "bl", "end");
  o += "<g shape-rendering=\"crispEdges\">";
  for (int64_t r = 0; r < ax.rb.count(); ++r) {
    const Cell& c = row_worst[size_t(r)];
    std::string fill, tag;
    switch (c.st) {
      case kNaN: fill = kNaNColour; tag = "NaN"; break;
      case kUnwritten: fill = kUnwrittenColour; tag = "unwritten"; break;
      case kClobbered: fill = fmt::format("url(#{}clob)", id); tag = "clobbered"; break;
      case kErr: fill = c.err > bad ? "#dc2626" : "#16a34a"; tag = c.err > bad ? "err" : "ok"; break;
      case kPad: fill = fmt::format("url(#{}pad)", id); tag = "pad"; break;
      case kNotChecked: fill = fmt::format("url(#{}unchk)", id); break;
      default: break;
    }
    if (fill.empty()) continue;
    if (ax.rb.exact() && ax.rb.count() <= 512) {
      o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"{}\"><title>{}: {}{}</title></rect>",
                       svg::num(kLeft + double(r) * ax.sx), svg::num(y), svg::num(ax.sx), fill, who(r),
                       tag.empty() ? "not checked" : tag, c.st == kErr ? fmt::format(" ({} {:.3g})", err_word, c.err) : "");
    } else {
      o += svg::rect(kLeft + double(r) * ax.sx, y, ax.sx, 16, fmt::format("fill=\"{}\"", fill));
    }
    if (ax.sx >= 30 && !tag.empty())
      o += svg::text(kLeft + (double(r) + 0.5) * ax.sx, y + 29, tag, c.st >= kClobbered ? "tb" : "tg", "middle");
  }
  o += "</g>";
  o += svg::rect(kLeft, y, ax.W, 16, "fill=\"none\" stroke=\"#374151\" stroke-width=\"1\"");
  y += ax.sx >= 30 ? 34 : 20;
}

// The buffer-row axis: ticks at 0, n, `ticks` (e.g. the documents' offsets) and (small buffers) every row.
void row_ticks(std::string& o, const RowAxis& ax, double& y, int64_t n, std::vector<int64_t> ticks, const std::string& label) {
  ticks.push_back(0);
  ticks.push_back(n);
  if (ax.rb.exact() && n <= 64)
    for (int64_t r = 0; r <= n; ++r) ticks.push_back(r);
  std::sort(ticks.begin(), ticks.end());
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  double last = -1e9;
  for (int64_t t : ticks) {
    const double x = ax.x(t);
    o += svg::line(x, y - 4, x, y + 1, "stroke=\"#374151\"");
    const std::string s = fmt::format("{}", t);
    if (x - last < 7.0 * double(s.size()) + 4) continue;
    o += svg::text(x, y + 12, s, "tk", "middle");
    last = x;
  }
  o += svg::text(kLeft + ax.W / 2, y + 28, label, "ax", "middle");
  y += 56;
}

// The colour scale of err_colour(., tol) from 1e-7 to 10, the gate marked.
void colour_scale(std::string& o, double& y, double tol, const std::string& label, const std::string& gate_label) {
  double cx = kLeft;
  o += svg::text(cx, y + 9, label, "lg");
  cx += 100;
  for (int i = 0; i <= 16; ++i) {
    const double v = std::pow(10.0, -7.0 + 8.0 * i / 16.0);
    o += svg::rect(cx + 16.0 * i, y, 16, 12, fmt::format("fill=\"{}\"", err_colour(v, tol)));
  }
  for (int e : {-7, -5, -3, -1, 1}) o += svg::text(cx + 16.0 * (e + 7) * 2 + 8, y + 24, fmt::format("1e{}", e), "tk", "middle");
  const double tx = cx + (std::log10(tol) + 7.0) / 8.0 * 16.0 * 16 + 8;
  o += svg::line(tx, y - 3, tx, y + 15, "stroke=\"#111827\" stroke-width=\"2\"");
  o += svg::text(tx + 4, y - 4, gate_label, "bs");
  y += 34;
}

std::string wrap_svg(const std::string& id, double W, double y, const std::string& body, const char* label) {
  const double width = std::max(kLeft + W + 20, 1100.0);
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pic\" width=\"{0}\" height=\"{1}\" "
                     "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">{3}{4}</svg>",
                     svg::num(width), svg::num(y), label, svg::hatch_defs(id), body);
}

void common_legend(svg::Legend& lg, const std::string& id, double tol, const char* within, const char* above) {
  lg.add(err_colour(tol * 0.05, tol), within);
  lg.add(err_colour(tol * 30, tol), above);
  lg.add(kNaNColour, "NaN / Inf in a valid row");
  lg.add(kUnwrittenColour, "valid row never written");
  lg.add(fmt::format("url(#{}clob)", id), "pad slot written (clobbered)");
  lg.add(fmt::format("url(#{}pad)", id), "pad slot, untouched");
}

}  // namespace

std::string svg_error_map(const CaseArtifacts& a, const std::string& id) {
  const Layout& l = a.layout;
  const auto tol = sdpa_tolerance(l.c);
  const Rows orows = owners(l, false), srows = owners(l, true);
  const auto oc = o_cells(a, orows, tol.atol);
  const auto lc = lse_cells(a, srows);
  const int H = l.c.hq;
  const int64_t n = std::max(l.o_rows, l.stats_rows);
  const RowAxis ax(n);
  const svg::Bins hb = svg::make_bins(H, 48);
  const double sy = std::clamp(180.0 / double(hb.count()), 4.0, 22.0);

  std::string o;
  double y = 18;
  svg::Legend lg(o, kLeft, y, kLeft + kMaxW);
  common_legend(lg, id, tol.rtol, "error within tolerance", "error above tolerance");
  int64_t valid_rows = 0;
  for (const auto& sg : l.segments) valid_rows += sg.rows;
  if (l.check_rows.size() < size_t(valid_rows)) lg.add(fmt::format("url(#{}unchk)", id), "valid row not checked (rows=N)");
  y = lg.bottom() + 8;
  if (!ax.rb.exact())
    o += svg::text(kLeft, y + 4, fmt::format("{} buffer rows per column (worst of them shown)", ax.rb.per), "bs");
  y += 14;

  // The O buffer's layout on the same x axis, and under CP its pad rows.
  std::vector<Span> spans, packed;
  for (size_t b = 0; b < l.docs.size(); ++b) {
    const auto& d = l.docs[b];
    spans.push_back({d.o_off, d.o_off + d.q_len, int(b)});
    packed.push_back({d.packed_q_off, d.packed_q_off + d.q_len, int(b)});
  }
  const double band_y = y;
  layout_band(o, id, ax, y, "O buffer (bound offsets)", fmt::format("{} rows", l.o_rows), spans, false);
  if (l.is_cp())
    for (const auto& s : l.segments)
      if (s.valid < s.rows)
        o += svg::rect(ax.x(s.o_row0 + s.valid), band_y, double(s.rows - s.valid) / double(ax.rb.per) * ax.sx, 18,
                       fmt::format("fill=\"url(#{}pad)\"", id));
  bool packed_differs = false;
  for (const auto& d : l.docs) packed_differs |= d.packed_q_off != d.o_off;
  if (packed_differs && !l.is_cp()) layout_band(o, id, ax, y, "prefix(lens) offsets", "ignoring the bound ones", packed, true);

  std::vector<Cell> row_worst(size_t(ax.rb.count()));
  y += draw_map(o, id, oc, l.o_rows, H, ax.rb, hb, ax.sx, sy, y, tol.rtol, "O rel. error", row_worst) + 10;
  y += draw_map(o, id, lc, l.stats_rows, H, ax.rb, hb, ax.sx, std::min(sy, 10.0), y, tol.lse_tol, "LSE error", row_worst) + 10;
  row_verdicts(o, id, ax, y, row_worst, tol.rtol, "max error", [&](int64_t r) {
    const int64_t q = orows.owner.size() > size_t(r) ? orows.owner[size_t(r)] : -1;
    const std::string who = q >= 0 ? fmt::format("doc {} ({}) row {}", l.seg_of(q).doc, svg::doc_letter(l.seg_of(q).doc),
                                                 q - l.seg_of(q).row0)
                                   : std::string("pad slot");
    return fmt::format("buffer row {}: {}", r, who);
  });
  std::vector<int64_t> ticks;
  if (l.docs.size() <= 32)
    for (const auto& d : l.docs) ticks.push_back(d.o_off);
  row_ticks(o, ax, y, n, ticks, "O / stats buffer row →");
  colour_scale(o, y, tol.rtol, "relative error:", fmt::format("tolerance {:g}", tol.rtol));
  return wrap_svg(id, ax.W, y, o, "SDPA error map");
}

std::string svg_gradient_maps(const CaseArtifacts& a, const std::string& id) {
  const Layout& l = a.layout;
  if (!a.cell_maps || a.cell_maps->empty()) return {};
  std::string o;
  double y = 18, W = 0;
  svg::Legend lg(o, kLeft, y, kLeft + kMaxW);
  common_legend(lg, id, 1.0, "error within its gate", "error above its gate");
  for (const auto& m : *a.cell_maps)
    if (std::find(m.state.begin(), m.state.end(), CellMap::NotJudged) != m.state.end()) {
      lg.add(fmt::format("url(#{}unchk)", id), "valid row not judged (rows=N)");
      break;
    }
  y = lg.bottom() + 8;
  // One panel per buffer: Q rows (dQ, and the indexer's dW), then K/V rows (dK, dV).
  for (bool kv : {false, true}) {
    std::vector<const CellMap*> maps;
    for (const auto& m : *a.cell_maps)
      if (m.kv_rows == kv) maps.push_back(&m);
    if (maps.empty()) continue;
    const int64_t n = maps.front()->rows;
    const RowAxis ax(n);
    W = std::max(W, ax.W);
    if (!ax.rb.exact())
      o += svg::text(kLeft, y + 4, fmt::format("{} buffer rows per column (worst of them shown)", ax.rb.per), "bs");
    y += 14;
    std::vector<Span> spans;
    std::vector<int64_t> ticks;
    if (kv) {
      for (size_t b = 0; b < l.docs.size(); ++b) spans.push_back({l.docs[b].kv_off, l.docs[b].kv_off + l.docs[b].kv_len, int(b)});
    } else {
      for (const auto& s : l.segments) spans.push_back({s.row0, s.row0 + s.valid, s.doc});
    }
    if (spans.size() <= 32)
      for (const Span& sp : spans) ticks.push_back(sp.r0);
    layout_band(o, id, ax, y, kv ? "K/V buffer" : "Q buffer", fmt::format("{} rows", n), spans, false);
    std::vector<Cell> row_worst(size_t(ax.rb.count()));
    for (const CellMap* m : maps) {
      const svg::Bins hb = svg::make_bins(m->heads, 48);
      const double sy = m->heads == 1 ? 12.0 : std::clamp(120.0 / double(hb.count()), 4.0, 18.0);
      std::vector<Cell> cells(m->state.size());
      for (size_t i = 0; i < cells.size(); ++i) {
        cells[i].st = kStateOf[m->state[i]];
        cells[i].err = m->ratio[i];
      }
      y += draw_map(o, id, cells, m->rows, m->heads, ax.rb, hb, ax.sx, sy, y, 1.0, m->name + " err/gate", row_worst) + 10;
    }
    row_verdicts(o, id, ax, y, row_worst, 1.0, "err/gate", [&](int64_t r) {
      if (kv) {
        for (size_t b = 0; b < l.docs.size(); ++b)
          if (r >= l.docs[b].kv_off && r < l.docs[b].kv_off + l.docs[b].kv_len)
            return fmt::format("K/V row {}: doc {} ({}) key {}", r, b, svg::doc_letter(int(b)), r - l.docs[b].kv_off);
        return fmt::format("K/V row {}: pad slot", r);
      }
      for (const auto& s : l.segments)
        if (r >= s.row0 && r < s.row0 + s.valid)
          return fmt::format("Q row {}: doc {} ({}) row {}", r, s.doc, svg::doc_letter(s.doc), r - s.row0 + s.tok0);
      return fmt::format("Q row {}: pad slot", r);
    });
    row_ticks(o, ax, y, n, ticks, kv ? "K/V buffer row →" : "Q buffer row →");
  }
  colour_scale(o, y, 1.0, "err / gate:", "gate");
  return wrap_svg(id, W, y, o, "gradient error maps");
}

}  // namespace ao

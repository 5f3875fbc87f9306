// Selection map of the indexer (see svg_pictures.h): y = Q rows of this rank, x = KV buffer rows.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "svg.h"
#include "svg_pictures.h"

namespace ao {

namespace {

enum : uint8_t { kAllow = 1, kAgree = 2, kMiss = 4, kExtra = 8 };

const char* const kAllowColour = "#d6e2f0";
const char* const kAgreeColour = "#1e3a8a";
const char* const kMissColour = "#60a5fa";
const char* const kExtraColour = "#dc2626";
const char* const kLimitColour = "#0f172a";

// One checked Q row: what the backend and the reference picked, as KV buffer rows.
struct RowPicks {
  int64_t row = 0;
  std::vector<int32_t> agree, miss, extra;
  int64_t invalid = 0;   // indices outside [0, kv_rows) other than the -1 fill
  bool unwritten = false;
  double overlap = -1;   // |B∩R| / min(k, allowed); -1 for rows without allowed keys
};

std::vector<RowPicks> collect(const CaseArtifacts& a) {
  const Layout& l = a.layout;
  const size_t K = size_t(l.c.topk);
  std::vector<RowPicks> out;
  out.reserve(l.check_rows.size());
  for (size_t i = 0; i < l.check_rows.size(); ++i) {  // artifacts hold the checked rows, in order
    const int64_t r = l.check_rows[i];
    RowPicks p;
    p.row = r;
    std::vector<int32_t> g, x;
    for (size_t e = 0; e < K; ++e) {
      const int32_t v = a.got.topk[i * K + e], w = a.ref.topk[i * K + e];
      if (v == kSentinelIndex) p.unwritten = true;
      else if (v >= 0 && v < l.kv_rows) g.push_back(v);
      else if (v != -1) ++p.invalid;
      if (w >= 0 && w < l.kv_rows) x.push_back(w);
    }
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    std::sort(x.begin(), x.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    std::set_intersection(g.begin(), g.end(), x.begin(), x.end(), std::back_inserter(p.agree));
    std::set_difference(g.begin(), g.end(), x.begin(), x.end(), std::back_inserter(p.extra));
    std::set_difference(x.begin(), x.end(), g.begin(), g.end(), std::back_inserter(p.miss));
    if (l.valid_row(r)) {
      int64_t lo, hi;
      l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
      const int64_t expect = std::min<int64_t>(int64_t(K), hi - lo);
      if (expect > 0) p.overlap = double(p.agree.size()) / double(expect);
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Power-of-two tick step giving at most ~8 ticks (the sizes these kernels see are powers of two).
int64_t tick_step(int64_t range) {
  int64_t s = 1;
  while (range / s > 8) s *= 2;
  return s;
}

struct Panel {
  int64_t k0 = 0, k1 = 0;  // KV rows shown
  svg::Bins kb;
  double x = 0, w = 0;
  std::string title;
};

struct Geometry {
  svg::Bins rb;
  double y0 = 0, sy = 1;
  double y(int64_t row) const { return y0 + double(rb.of(row)) * sy; }
  double h() const { return double(rb.count()) * sy; }
};

std::string draw_panel(const CaseArtifacts& a, const std::vector<RowPicks>& picks, const Geometry& geo,
                       const Panel& p, const std::string& id) {
  const Layout& l = a.layout;
  const int64_t R = geo.rb.count(), C = p.kb.count();
  const double sx = p.w / double(C);
  std::vector<uint8_t> grid(size_t(R * C), 0);
  std::vector<uint8_t> row_valid(size_t(R), 0);
  for (int64_t r = 0; r < l.q_rows; ++r) {
    if (!l.valid_row(r)) continue;
    const int64_t rb = geo.rb.of(r);
    row_valid[size_t(rb)] = 1;
    const auto& seg = l.seg_of(r);
    int64_t lo, hi;
    l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
    const int64_t base = l.docs[size_t(seg.doc)].kv_off;
    const int64_t a0 = std::max(base + lo, p.k0), a1 = std::min(base + hi, p.k1);
    if (a0 >= a1) continue;
    const int64_t b0 = p.kb.of(a0 - p.k0), b1 = p.kb.of(a1 - 1 - p.k0);
    for (int64_t b = b0; b <= b1; ++b) grid[size_t(rb * C + b)] |= kAllow;
  }
  auto mark = [&](int64_t rb, const std::vector<int32_t>& v, uint8_t f) {
    for (int32_t k : v)
      if (k >= p.k0 && k < p.k1) grid[size_t(rb * C + p.kb.of(k - p.k0))] |= f;
  };
  for (const auto& pk : picks) {
    const int64_t rb = geo.rb.of(pk.row);
    mark(rb, pk.agree, kAgree);
    mark(rb, pk.miss, kMiss);
    mark(rb, pk.extra, kExtra);
  }
  const bool big = sx >= 4 && geo.sy >= 4;
  std::string o;
  o += svg::text(p.x, geo.y0 - 8, p.title, "pt");
  o += svg::rect(p.x, geo.y0, p.w, geo.h(), "fill=\"#ffffff\" stroke=\"none\"");
  o += fmt::format("<g transform=\"translate({} {}) scale({} {})\" shape-rendering=\"crispEdges\">", svg::num(p.x),
                   svg::num(geo.y0), fmt::format("{:.6g}", sx), fmt::format("{:.6g}", geo.sy));
  auto layer = [&](uint8_t f) {
    svg::CellRuns runs(R);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        if (grid[size_t(r * C + c)] & f) runs.add(r, c);
    return runs;
  };
  o += svg::runs_path(layer(kAllow), kAllowColour);
  if (big) {  // one cell per key and row: misses as outlines, picks as squares
    auto cells = [&](uint8_t f, bool outline, const char* colour) {
      std::string d;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
          if (grid[size_t(r * C + c)] & f) d += fmt::format("M{}.15 {}.15h.7v.7h-.7z", c, r);
      if (d.empty()) return std::string();
      return outline ? fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                                   "vector-effect=\"non-scaling-stroke\"/>", d, colour)
                     : fmt::format("<path d=\"{}\" fill=\"{}\"/>", d, colour);
    };
    o += cells(kMiss, true, "#2563eb");
    o += cells(kAgree, false, kAgreeColour);
    o += cells(kExtra, false, kExtraColour);
  } else {
    o += svg::runs_path(layer(kMiss), kMissColour);
    o += svg::runs_path(layer(kAgree), kAgreeColour);
    o += svg::runs_path(layer(kExtra), kExtraColour);
  }
  o += "</g>";
  // Row bins without a single valid row are pad rows.
  for (int64_t r = 0; r < R;) {
    if (row_valid[size_t(r)]) { ++r; continue; }
    int64_t e = r;
    while (e < R && !row_valid[size_t(e)]) ++e;
    o += svg::rect(p.x, geo.y0 + double(r) * geo.sy, p.w, double(e - r) * geo.sy, fmt::format("fill=\"url(#{}pad)\"", id));
    r = e;
  }
  // The causal limit: per row of cells, the end of the allowed keys (a staircase; breaks at segments).
  {
    std::vector<int64_t> lim(size_t(R), -1);
    std::vector<int32_t> seg_of_bin(size_t(R), -1);
    for (int64_t r = 0; r < l.q_rows; ++r) {
      if (!l.valid_row(r)) continue;
      const auto& seg = l.seg_of(r);
      int64_t lo, hi;
      l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
      const int64_t rb = geo.rb.of(r);
      lim[size_t(rb)] = std::max(lim[size_t(rb)], l.docs[size_t(seg.doc)].kv_off + hi);
      seg_of_bin[size_t(rb)] = l.row_segment[size_t(r)];
    }
    std::string d;
    bool open = false;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t k = lim[size_t(r)];
      if (k < p.k0 || k > p.k1 || (r > 0 && seg_of_bin[size_t(r)] != seg_of_bin[size_t(r - 1)])) open = false;
      if (k < p.k0 || k > p.k1) continue;
      const double x = p.x + double(k - p.k0) / double(p.k1 - p.k0) * p.w, y = geo.y0 + double(r) * geo.sy;
      d += open ? fmt::format("H{}V{}", svg::num(x), svg::num(y + geo.sy))
                : fmt::format("M{} {}V{}", svg::num(x), svg::num(y), svg::num(y + geo.sy));
      open = true;
    }
    if (!d.empty()) o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>", d, kLimitColour);
  }
  // Document boundaries in the KV buffer (when few enough to read), and the key axis.
  for (const auto& d : l.docs)
    if (l.docs.size() <= 32 && d.kv_off > p.k0 && d.kv_off < p.k1) {
      const double x = p.x + double(d.kv_off - p.k0) / double(p.k1 - p.k0) * p.w;
      o += svg::line(x, geo.y0, x, geo.y0 + geo.h(), "stroke=\"#111827\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"");
    }
  o += svg::rect(p.x, geo.y0, p.w, geo.h(), "fill=\"none\" stroke=\"#374151\" stroke-width=\"1\"");
  const int64_t step = tick_step(p.k1 - p.k0);
  double last = -1e9;
  const double ya = geo.y0 + geo.h();
  std::vector<int64_t> ticks;
  for (int64_t t = (p.k0 + step - 1) / step * step; t <= p.k1; t += step) ticks.push_back(t);
  if (ticks.empty() || ticks.front() != p.k0) ticks.insert(ticks.begin(), p.k0);
  if (ticks.back() != p.k1) ticks.push_back(p.k1);
  for (int64_t t : ticks) {
    const double x = p.x + double(t - p.k0) / double(p.k1 - p.k0) * p.w;
    o += svg::line(x, ya, x, ya + 4, "stroke=\"#374151\"");
    const std::string s = fmt::format("{}", t);
    if (x - last < 7.0 * double(s.size()) + 4 && t != p.k1) continue;
    if (t == p.k1 && x - last < 7.0 * double(s.size()) + 4) continue;
    o += svg::text(x, ya + 15, s, "tk", "middle");
    last = x;
  }
  return o;
}

}  // namespace

std::string svg_selection_map(const CaseArtifacts& a, const std::string& id) {
  const Layout& l = a.layout;
  const auto picks = collect(a);

  // Zoom on the backend's extra picks (or its misses) when they sit in a narrow key range.
  auto span_of = [&](bool extra, int64_t& lo, int64_t& hi) {
    lo = l.kv_rows;
    hi = -1;
    for (const auto& p : picks)
      for (int32_t k : extra ? p.extra : p.miss) {
        lo = std::min<int64_t>(lo, k);
        hi = std::max<int64_t>(hi, k);
      }
    return hi >= lo;
  };
  int64_t zlo = 0, zhi = -1;
  bool zoom = false;
  const bool zoom_extra = span_of(true, zlo, zhi);
  if (l.kv_rows > 64 && (zoom_extra || span_of(false, zlo, zhi))) {
    const int64_t w = zhi - zlo + 1;
    if (double(w) <= 0.35 * double(l.kv_rows)) {
      const int64_t m = std::max<int64_t>(w / 2, 8);
      zlo = std::max<int64_t>(0, zlo - m);
      zhi = std::min<int64_t>(l.kv_rows, zhi + 1 + m);
      zoom = true;
    }
  }

  const double left = 200, spark_w = 100, gap = 26;
  const double main_w = zoom ? 560 : 820, zoom_w = 300;
  Geometry geo;
  geo.rb = svg::make_bins(l.q_rows, 256);
  geo.sy = std::clamp(512.0 / double(geo.rb.count()), 1.0, 14.0);
  geo.y0 = 84;

  // Keep the picture bounded: coarsen the key bins until the pick layers fit the budget.
  Panel mp;
  mp.k0 = 0;
  mp.k1 = l.kv_rows;
  mp.x = left;
  mp.w = main_w;
  int64_t max_cols = std::min<int64_t>(int64_t(main_w), 640);
  std::string main_svg;
  for (;;) {
    mp.kb = svg::make_bins(l.kv_rows, max_cols);
    mp.title = mp.kb.exact() ? fmt::format("all keys: KV rows 0–{} (one column per key)", l.kv_rows)
                             : fmt::format("all keys: KV rows 0–{} ({} keys per column)", l.kv_rows, mp.kb.per);
    main_svg = draw_panel(a, picks, geo, mp, id);
    if (main_svg.size() < 700000 || max_cols <= 64) break;
    max_cols /= 2;
  }
  std::string zoom_svg;
  Panel zp;
  if (zoom) {
    zp.k0 = zlo;
    zp.k1 = zhi;
    zp.x = left + main_w + gap;
    zp.w = zoom_w;
    int64_t zc = 300;
    for (;;) {
      zp.kb = svg::make_bins(zhi - zlo, zc);
      zp.title = fmt::format("zoom on {}: KV rows {}–{}{}", zoom_extra ? "extra picks" : "misses", zlo, zhi,
                             zp.kb.exact() ? "" : fmt::format(" ({}/column)", zp.kb.per));
      zoom_svg = draw_panel(a, picks, geo, zp, id);
      if (zoom_svg.size() < 400000 || zc <= 32) break;
      zc /= 2;
    }
  }
  const double spark_x = left + main_w + (zoom ? gap + zoom_w : 0) + gap;

  std::string o;
  // Legend.
  const double ly = 18;
  svg::Legend lg(o, left, ly, spark_x + spark_w);
  lg.add(kAllowColour, "allowed keys (causal, same document)");
  lg.add(kAgreeColour, "picked by both");
  const bool outline = mp.kb.exact() && geo.sy >= 4 && mp.w / double(mp.kb.count()) >= 4;
  lg.add(outline ? "none" : kMissColour, "reference pick the backend missed", outline ? "#2563eb" : "");
  lg.add(kExtraColour, "backend's extra pick");
  lg.add("none", "causal limit", kLimitColour);
  lg.add(fmt::format("url(#{}pad)", id), "pad rows");
  o += svg::text(left, lg.bottom() + 12,
                 geo.rb.exact() ? fmt::format("one row per Q row ({} rows{})", l.q_rows,
                                              l.check_rows.size() < size_t(l.q_rows) ? ", only checked rows carry picks" : "")
                                : fmt::format("{} Q rows per row of cells (union of their picks); only checked rows carry picks",
                                              geo.rb.per),
                 "bs");

  o += main_svg;
  o += zoom_svg;

  // Row labels: one per segment (chunk), at its first row.
  const size_t nseg = l.segments.size();
  for (size_t i = 0; i < nseg; ++i) {
    const auto& s = l.segments[i];
    const double y = geo.y(s.row0);
    if (nseg > 32) break;  // too many to draw; the table below lists the first ones
    o += svg::line(left - 6, y, spark_x + spark_w, y, "stroke=\"#111827\" stroke-width=\"1\" stroke-opacity=\"0.6\"");
    if (nseg > 16) continue;
    const double yh = geo.y(s.row0 + s.rows) - y;
    const double yt = y + std::min(yh / 2, 30.0);
    o += svg::text(left - 10, yt - 4,
                   s.chunk >= 0 ? fmt::format("doc {} chunk {}", s.doc, s.chunk) : fmt::format("doc {}", s.doc), "bl", "end");
    o += svg::text(left - 10, yt + 9, fmt::format("Q rows {}–{}", s.row0, s.row0 + s.rows - 1), "bs", "end");
    o += svg::text(left - 10, yt + 21, fmt::format("positions {}–{}", s.pos0, s.pos0 + s.rows - 1), "bs", "end");
  }
  o += svg::line(left - 6, geo.y0 + geo.h(), left, geo.y0 + geo.h(), "stroke=\"#111827\"");
  o += svg::text(left + main_w / 2, geo.y0 + geo.h() + 32, "key = KV buffer row →", "ax", "middle");
  o += svg::text(left - 10, geo.y0 + geo.h() + 14, "Q row ↓", "ax", "end");

  // Overlap bars per row bin: mean |B∩R| / min(k, allowed) over its checked rows.
  o += svg::text(spark_x, geo.y0 - 8, "overlap per row", "pt");
  o += svg::rect(spark_x, geo.y0, spark_w, geo.h(), "fill=\"#f9fafb\" stroke=\"#374151\" stroke-width=\"1\"");
  const int64_t R = geo.rb.count();
  std::vector<double> sum(size_t(R), 0);
  std::vector<int> cnt(size_t(R), 0);
  for (const auto& p : picks)
    if (p.overlap >= 0) {
      sum[size_t(geo.rb.of(p.row))] += p.overlap;
      ++cnt[size_t(geo.rb.of(p.row))];
    }
  for (int64_t r = 0; r < R; ++r) {
    if (!cnt[size_t(r)]) continue;
    const double ov = sum[size_t(r)] / cnt[size_t(r)];
    const double y = geo.y0 + double(r) * geo.sy;
    if (ov < 1) o += svg::rect(spark_x + ov * spark_w, y, (1 - ov) * spark_w, geo.sy, "fill=\"#fecaca\"");
    o += svg::rect(spark_x, y, ov * spark_w, geo.sy, ov >= 1 ? "fill=\"#16a34a\"" : "fill=\"#f97316\"");
  }
  for (double t : {0.0, 0.5, 1.0}) {
    const double x = spark_x + t * spark_w;
    o += svg::line(x, geo.y0, x, geo.y0 + geo.h() + 4, "stroke=\"#374151\" stroke-width=\"0.6\"");
    o += svg::text(x, geo.y0 + geo.h() + 15, svg::num(t), "tk", "middle");
  }
  const double height = geo.y0 + geo.h() + 44;
  const double width = spark_x + spark_w + 16;
  std::string svgs = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pic\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"indexer selection map\">{2}{3}</svg>",
      svg::num(width), svg::num(height), svg::hatch_defs(id), o);

  // The numbers behind the picture, per segment: how far each side's picks reach relative to the
  // row's causal limit (its last allowed key): 0 = the newest allowed key, -N = stops N keys short.
  std::string t = "<table class=\"reach\"><tr><th>segment</th><th>Q rows</th><th>positions (q_causal_offset)</th>"
                  "<th>checked rows</th><th>mean overlap</th><th>reference: max(pick − causal limit)</th>"
                  "<th>backend: max(pick − causal limit)</th><th>rows whose backend picks all lie in [0, row − first row]</th></tr>";
  std::vector<std::string> rows_bad, rows_ok;
  for (size_t i = 0; i < nseg; ++i) {
    const auto& s = l.segments[i];
    const int64_t base = l.docs[size_t(s.doc)].kv_off;
    int64_t n = 0, local = 0;
    double ov = 0;
    int64_t ref_reach = INT64_MIN, got_reach = INT64_MIN;
    for (const auto& p : picks) {
      if (l.row_segment[size_t(p.row)] != int32_t(i) || !l.valid_row(p.row)) continue;
      ++n;
      ov += std::max(p.overlap, 0.0);
      int64_t lo, hi;
      l.allowed_range(s.doc, l.pos_of(p.row), lo, hi);
      const int64_t limit = hi - 1, li = p.row - s.row0;
      int64_t gmax = INT64_MIN, rmax = INT64_MIN;
      bool all_local = true, any = false;
      for (const auto* v : {&p.agree, &p.extra})
        for (int32_t k : *v) {
          const int64_t dk = k - base;
          if (dk < 0 || dk >= l.docs[size_t(s.doc)].kv_len) continue;  // other documents: cross_doc metric
          gmax = std::max(gmax, dk);
          all_local &= dk <= li;
          any = true;
        }
      for (const auto* v : {&p.agree, &p.miss})
        for (int32_t k : *v) rmax = std::max<int64_t>(rmax, k - base);
      if (gmax != INT64_MIN) got_reach = std::max(got_reach, gmax - limit);
      if (rmax != INT64_MIN) ref_reach = std::max(ref_reach, rmax - limit);
      local += any && all_local;
    }
    auto reach = [](int64_t v) { return v == INT64_MIN ? std::string("–") : fmt::format("{}", v); };
    const bool bad = got_reach != INT64_MIN && ref_reach != INT64_MIN && got_reach != ref_reach;
    auto& dst = bad || (n && ov < double(n)) ? rows_bad : rows_ok;
    if (rows_bad.size() >= 16 && &dst == &rows_bad) { dst.emplace_back(); continue; }  // counted, not shown
    if (rows_bad.size() + rows_ok.size() >= 16 && &dst == &rows_ok) { dst.emplace_back(); continue; }
    dst.push_back(fmt::format("<tr><td>{}</td><td>{}–{}</td><td>{}–{} ({})</td><td>{}</td><td>{:.3f}</td><td>{}</td>"
                     "<td{}>{}{}</td><td>{}</td></tr>",
                     s.chunk >= 0 ? fmt::format("doc {} chunk {}", s.doc, s.chunk) : fmt::format("doc {}", s.doc), s.row0,
                     s.row0 + s.rows - 1, s.pos0, s.pos0 + s.rows - 1, s.pos0, n, n ? ov / double(n) : 0.0, reach(ref_reach),
                     bad ? " class=\"bad\"" : "", reach(got_reach),
                     got_reach != INT64_MIN && s.pos0 > 0 && got_reach == -s.pos0 ? " (= −q_causal_offset)" : "",
                     s.pos0 > 0 ? fmt::format("{} of {}", local, n) : std::string("–")));
  }
  size_t shown = 0;
  for (const auto* v : {&rows_bad, &rows_ok})
    for (const auto& row : *v)
      if (!row.empty() && shown < 16) {
        t += row;
        ++shown;
      }
  t += "</table>";
  if (shown < nseg)
    t += fmt::format("<p class=\"note\">{} of {} segments listed ({} with overlap &lt; 1 or a different reach; those first).</p>",
                     shown, nseg, rows_bad.size());
  return svgs + t;
}

}  // namespace ao

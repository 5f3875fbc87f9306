// Layout strip: the case's buffers as bars (see svg_pictures.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"
#include "svg.h"
#include "svg_pictures.h"

namespace ao {

namespace {

constexpr double kLeft = 190, kBarW = 900, kWidth = kLeft + kBarW + 30;

struct Geo {
  double y = 0;
  int64_t rows = 1;
  double x(int64_t r) const { return kLeft + double(r) * kBarW / double(std::max<int64_t>(rows, 1)); }
};

// A bar of `rows` cells: pad pattern under everything, then spans, capacity past `end`.
struct Span {
  int64_t r0, r1;
  std::string fill;
  int doc;
};

// Offset labels: placed below the bar, dropped when they would overlap the previous one.
void tick_labels(std::string& o, const Geo& g, double h, std::vector<int64_t> at, const std::string& cls) {
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  double last = -1e9;
  for (int64_t r : at) {
    const double x = g.x(r);
    o += svg::line(x, g.y - 2, x, g.y + h + 3, "stroke=\"#111827\" stroke-width=\"1\"");
    const std::string s = fmt::format("{}", r);
    if (x - last < 6.5 * double(s.size()) + 6) continue;
    o += svg::text(x, g.y + h + 14, s, cls, "middle");
    last = x;
  }
}

void draw_bar(std::string& o, const std::string& id, const Geo& g, double h, const std::string& label,
              const std::string& sub, const std::vector<Span>& spans, int64_t end, bool letters) {
  o += svg::text(kLeft - 10, g.y + h / 2 - 1, label, "bl", "end");
  if (!sub.empty()) o += svg::text(kLeft - 10, g.y + h / 2 + 11, sub, "bs", "end");
  o += svg::rect(g.x(0), g.y, kBarW, h, fmt::format("fill=\"url(#{}pad)\"", id));
  if (end < g.rows) o += svg::rect(g.x(end), g.y, g.x(g.rows) - g.x(end), h, fmt::format("fill=\"url(#{}cap)\"", id));
  for (const auto& s : spans)
    o += svg::rect(g.x(s.r0), g.y, g.x(s.r1) - g.x(s.r0), h, fmt::format("fill=\"{}\"", s.fill));
  const double cw = kBarW / double(std::max<int64_t>(g.rows, 1));
  if (cw >= 9) {  // one cell per row: separators, and TE-style token letters for small buffers
    for (int64_t r = 1; r < g.rows; ++r)
      o += svg::line(g.x(r), g.y, g.x(r), g.y + h, "stroke=\"#ffffff\" stroke-width=\"1\"");
    if (letters)
      for (const auto& s : spans)
        for (int64_t r = s.r0; r < s.r1; ++r)
          o += svg::text((g.x(r) + g.x(r + 1)) / 2, g.y + h / 2 + 4, svg::doc_letter(s.doc), "cl", "middle");
  }
  o += svg::rect(g.x(0), g.y, kBarW, h, "fill=\"none\" stroke=\"#374151\" stroke-width=\"1\"");
}

void ghost(std::string& o, const Layout& l, bool small, double& y);

// Non-CP: one bar per distinct placement (Q, K/V, O, stats), plus the prefix(lens) placement when the
// bound offsets differ from it.
void plain_bars(std::string& o, const Layout& l, const std::string& id, double& y) {
  struct Buf {
    std::string name;
    std::vector<int64_t> off, len;
    int64_t rows;
  };
  std::vector<int64_t> q_off, kv_off, o_off, s_off, q_len, kv_len, packed;
  for (const auto& d : l.docs) {
    q_off.push_back(d.q_off);
    kv_off.push_back(d.kv_off);
    o_off.push_back(d.o_off);
    s_off.push_back(d.stats_off);
    q_len.push_back(d.q_len);
    kv_len.push_back(d.kv_len);
    packed.push_back(d.packed_q_off);
  }
  std::vector<Buf> bufs = {{"Q", q_off, q_len, l.q_rows}};
  auto merge = [&](const std::string& n, const std::vector<int64_t>& off, const std::vector<int64_t>& len, int64_t rows) {
    for (auto& b : bufs)
      if (b.off == off && b.len == len && b.rows == rows) {
        b.name += " = " + n;
        return;
      }
    bufs.push_back({n, off, len, rows});
  };
  merge("K/V", kv_off, kv_len, l.kv_rows);
  merge("O", o_off, q_len, l.o_rows);
  merge("stats", s_off, q_len, l.stats_rows);
  const bool small = l.docs.size() <= 64;
  bool first = true;
  for (const auto& b : bufs) {
    Geo g{y, b.rows};
    std::vector<Span> spans;
    std::vector<int64_t> ticks = {b.rows};
    int64_t end = 0;
    for (size_t i = 0; i < b.off.size(); ++i) {
      spans.push_back({b.off[i], b.off[i] + b.len[i], svg::doc_colour(int(i)), int(i)});
      end = std::max(end, b.off[i] + b.len[i]);
      if (small) ticks.push_back(b.off[i]);
    }
    draw_bar(o, id, g, 26, b.name + " buffer", fmt::format("{} rows", b.rows), spans, end, true);
    tick_labels(o, g, 26, ticks, "tk");
    y += 50;
    if (first && packed != q_off) ghost(o, l, small, y);  // right under the Q buffer it refers to
    first = false;
  }
}

// Where a kernel that derives each sequence's start from the lengths (prefix sums) puts them.
void ghost(std::string& o, const Layout& l, bool small, double& y) {
  {
    Geo g{y, l.q_rows};
    o += svg::text(kLeft - 10, y + 8, "prefix(lens) offsets", "bl", "end");
    o += svg::text(kLeft - 10, y + 20, "ignoring the bound ones", "bs", "end");
    std::vector<int64_t> ticks;
    for (size_t i = 0; i < l.docs.size(); ++i) {
      const auto& d = l.docs[i];
      o += svg::rect(g.x(d.packed_q_off), y, g.x(d.packed_q_off + d.q_len) - g.x(d.packed_q_off), 16,
                     fmt::format("fill=\"{}\" fill-opacity=\"0.35\" stroke=\"{}\" stroke-width=\"1.5\" "
                                 "stroke-dasharray=\"4 2\"",
                                 svg::doc_colour(int(i)), svg::doc_colour(int(i))));
      if (small) ticks.push_back(d.packed_q_off);
      if (kBarW / double(std::max<int64_t>(l.q_rows, 1)) >= 9)
        for (int64_t r = d.packed_q_off; r < d.packed_q_off + d.q_len; ++r)
          o += svg::text((g.x(r) + g.x(r + 1)) / 2, y + 12, svg::doc_letter(int(i)), "cp", "middle");
    }
    tick_labels(o, g, 16, ticks, "tk");
    y += 40;
  }
}

// CP: the global buffer cut into chunks coloured by holding rank, this rank's local Q buffer below,
// and connectors from each chunk to the local rows that hold it.
void cp_bars(std::string& o, const Layout& l, const std::string& id, double& y) {
  const Case& c = l.c;
  const bool zz = c.cp_scheme == CpScheme::Zigzag;
  const int64_t parts = zz ? 2 * int64_t(c.cp) : c.cp;
  int64_t global_rows = 0;
  for (const auto& d : l.docs) global_rows = std::max(global_rows, d.q_off + d.q_padded);
  const bool chunk_cells = int64_t(l.docs.size()) * parts <= 2048;
  const std::vector<svg::Rgb> ramp = {svg::hex("#fff1c1"), svg::hex("#f8b24a"), svg::hex("#d9480f"), svg::hex("#5c1a08")};
  auto rank_of = [&](int64_t chunk) { return zz ? std::min<int64_t>(chunk, parts - 1 - chunk) : chunk; };
  auto rank_colour = [&](int64_t rank) { return svg::css(svg::ramp(ramp, c.cp > 1 ? double(rank) / double(c.cp - 1) : 0)); };

  Geo g{y + 16, global_rows};
  const double h = 28;
  std::vector<Span> spans;
  int64_t end = 0;
  for (size_t b = 0; b < l.docs.size(); ++b) {
    const auto& d = l.docs[b];
    end = std::max(end, d.q_off + d.q_padded);
    const int64_t ch = d.q_padded / parts;
    if (chunk_cells) {
      for (int64_t j = 0; j < parts; ++j) spans.push_back({d.q_off + j * ch, d.q_off + (j + 1) * ch, rank_colour(rank_of(j)), int(b)});
    } else {
      spans.push_back({d.q_off, d.q_off + d.q_padded, svg::doc_colour(int(b)), int(b)});
    }
  }
  const bool same_kv = [&] {
    for (const auto& d : l.docs)
      if (d.kv_off != d.q_off || d.kv_len != d.q_len) return false;
    return l.kv_rows == global_rows;
  }();
  draw_bar(o, id, g, h, same_kv ? "global Q = K/V buffer" : "global Q buffer",
           fmt::format("{} rows, {} {} chunks/doc", global_rows, parts, to_string(c.cp_scheme)), spans, end, false);
  // Pad rows (positions >= the valid length) over the chunk colours.
  for (const auto& d : l.docs)
    if (d.q_len < d.q_padded)
      o += svg::rect(g.x(d.q_off + d.q_len), g.y, g.x(d.q_off + d.q_padded) - g.x(d.q_off + d.q_len), h,
                     fmt::format("fill=\"url(#{}pad)\" fill-opacity=\"0.85\"", id));
  std::vector<int64_t> ticks = {global_rows};
  for (const auto& d : l.docs) ticks.push_back(d.q_off);
  for (size_t b = 0; b < l.docs.size() && l.docs.size() <= 8; ++b)
    o += svg::text((g.x(l.docs[b].q_off) + g.x(l.docs[b].q_off + l.docs[b].q_padded)) / 2, g.y - 5,
                   fmt::format("doc {} ({} valid of {})", b, l.docs[b].q_len, l.docs[b].q_padded), "bs", "middle");
  for (const auto& d : l.docs)
    o += svg::line(g.x(d.q_off), g.y - 3, g.x(d.q_off), g.y + h + 3, "stroke=\"#111827\" stroke-width=\"2\"");

  // This rank's local Q buffer.
  Geo lg{g.y + h + 70, l.q_rows};
  const double lh = 26;
  std::vector<Span> lspans;
  std::vector<int64_t> lticks = {l.q_rows};
  for (const auto& s : l.segments) {
    lspans.push_back({s.row0, s.row0 + s.valid, rank_colour(c.rank), s.doc});
    lticks.push_back(s.row0);
  }
  // Connectors first, so bars and outlines draw over them.
  const size_t nseg = l.segments.size();
  for (size_t i = 0; i < nseg; ++i) {
    const auto& s = l.segments[i];
    const auto& d = l.docs[size_t(s.doc)];
    const int64_t g0 = d.q_off + s.pos0, g1 = g0 + s.rows;
    o += fmt::format("<polygon points=\"{},{} {},{} {},{} {},{}\" fill=\"#2563eb\" fill-opacity=\"0.10\" "
                     "stroke=\"#2563eb\" stroke-opacity=\"0.5\" stroke-width=\"1\"/>",
                     svg::num(g.x(g0)), svg::num(g.y + h), svg::num(g.x(g1)), svg::num(g.y + h), svg::num(lg.x(s.row0 + s.rows)),
                     svg::num(lg.y), svg::num(lg.x(s.row0)), svg::num(lg.y));
  }
  for (size_t i = 0; i < nseg; ++i) {  // outline this rank's chunks in the global bar
    const auto& s = l.segments[i];
    const int64_t g0 = l.docs[size_t(s.doc)].q_off + s.pos0;
    o += svg::rect(g.x(g0), g.y - 1, g.x(g0 + s.rows) - g.x(g0), h + 2,
                   "fill=\"none\" stroke=\"#2563eb\" stroke-width=\"3\"");
    if (nseg <= 8)  // kept inside the bar's span so labels at either end stay readable
      o += svg::text(std::clamp((g.x(g0) + g.x(g0 + s.rows)) / 2, kLeft + 70, kLeft + kBarW - 70),
                     g.y + h + 30 + 12.0 * double(i % 2), fmt::format("chunk {} @ pos {}", s.chunk, s.pos0), "hl", "middle");
  }
  draw_bar(o, id, lg, lh, fmt::format("rank {} local Q", c.rank), fmt::format("{} rows (= global / cp)", l.q_rows),
           lspans, l.q_rows, false);
  for (const auto& s : l.segments)  // pad rows inside a chunk
    if (s.valid < s.rows)
      o += svg::rect(lg.x(s.row0 + s.valid), lg.y, lg.x(s.row0 + s.rows) - lg.x(s.row0 + s.valid), lh,
                     fmt::format("fill=\"url(#{}pad)\"", id));
  for (size_t i = 0; i < nseg; ++i) {
    const auto& s = l.segments[i];
    o += svg::rect(lg.x(s.row0), lg.y, lg.x(s.row0 + s.rows) - lg.x(s.row0), lh,
                   "fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\"");
    const svg::Rgb bg = svg::ramp(ramp, c.cp > 1 ? double(c.rank) / double(c.cp - 1) : 0);
    const bool dark = 0.299 * bg.r + 0.587 * bg.g + 0.114 * bg.b < 150;  // white text only on dark fills
    if (nseg <= 8)
      o += svg::text((lg.x(s.row0) + lg.x(s.row0 + s.rows)) / 2, lg.y + lh / 2 + 4,
                     fmt::format("chunk {} · q_causal_offset {}", s.chunk, s.pos0), dark ? "cw" : "cp", "middle");
  }
  tick_labels(o, lg, lh, lticks, "tk");
  // Rank colour legend.
  double lx = kLeft;
  const double ly = lg.y + lh + 36;
  o += svg::text(lx, ly, "chunk colour = rank holding it:", "lg");
  lx += 190;
  const int steps = std::min(c.cp, 16);
  for (int i = 0; i < steps; ++i) {
    const int64_t r = steps > 1 ? int64_t(std::lround(double(i) * double(c.cp - 1) / double(steps - 1))) : 0;
    o += svg::rect(lx + 22.0 * i, ly - 10, 22, 12, fmt::format("fill=\"{}\"", rank_colour(r)));
    if (i == 0 || i == steps - 1) o += svg::text(lx + 22.0 * i + 11, ly + 14, fmt::format("{}", r), "tk", "middle");
  }
  lx += 22.0 * steps + 20;
  o += svg::rect(lx, ly - 10, 22, 12, "fill=\"none\" stroke=\"#2563eb\" stroke-width=\"3\"");
  o += svg::text(lx + 28, ly, fmt::format("held by rank {}", c.rank), "lg");
  lx += 140;
  o += svg::rect(lx, ly - 10, 22, 12, fmt::format("fill=\"url(#{}pad)\"", id));
  o += svg::text(lx + 28, ly, "pad rows / slots", "lg");
  y = ly + 26;
  if (!same_kv) {  // K/V placement when it differs from the global Q placement
    Geo kg{y, l.kv_rows};
    std::vector<Span> ks;
    std::vector<int64_t> kt = {l.kv_rows};
    int64_t kend = 0;
    for (size_t b = 0; b < l.docs.size(); ++b) {
      ks.push_back({l.docs[b].kv_off, l.docs[b].kv_off + l.docs[b].kv_len, svg::doc_colour(int(b)), int(b)});
      kend = std::max(kend, l.docs[b].kv_off + l.docs[b].kv_len);
      if (l.docs.size() <= 64) kt.push_back(l.docs[b].kv_off);
    }
    draw_bar(o, id, kg, 22, "K/V buffer (all-gathered)", fmt::format("{} rows", l.kv_rows), ks, kend, false);
    tick_labels(o, kg, 22, kt, "tk");
    y += 46;
  }
}

}  // namespace

std::string svg_layout_strip(const Layout& l, const std::string& id) {
  std::string body;
  double y = 12;
  if (l.is_cp())
    cp_bars(body, l, id, y);
  else
    plain_bars(body, l, id, y);
  // Legend for the plain bars.
  if (!l.is_cp()) {
    svg::Legend lg(body, kLeft, y + 4, kLeft + kBarW);
    for (size_t b = 0; b < std::min<size_t>(l.docs.size(), 6); ++b)
      lg.add(svg::doc_colour(int(b)), fmt::format("doc {} ({})", b, svg::doc_letter(int(b))));
    lg.add(fmt::format("url(#{}pad)", id), "pad slot (gap)");
    lg.add(fmt::format("url(#{}cap)", id), "capacity past the last sequence");
    y = lg.bottom() + 6;
  }
  const double height = y + 6;
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pic\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                     "role=\"img\" aria-label=\"buffer layout\">{}{}</svg>",
                     svg::num(kWidth), svg::num(height), svg::num(kWidth), svg::num(height), svg::hatch_defs(id), body);
}

}  // namespace ao

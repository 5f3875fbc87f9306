// Structural validation and derivation of a Layout from a Case (see layout.h for the semantics).
#include "attn_oracle/layout.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/rng.h"

namespace ao {

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 16; ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  if (v.size() > 16) s += ",...";
  return s;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Document position of the segment whose first row is the document's q token `tok0` (layout.h): one
// rule for CP chunks and whole documents.
int64_t segment_pos0(const Case& c, const DocLayout& d, int64_t tok0) {
  return (c.mask == MaskKind::BottomRight ? bottom_right_shift(d.q_len, d.kv_len, c.ratio) : 0) + tok0;
}

// Broadcast a pad list (1 or B entries) to B entries.
std::vector<int64_t> pads(const std::string& key, const std::vector<int64_t>& p, size_t B) {
  if (p.empty()) return std::vector<int64_t>(B, 0);
  if (p.size() == 1) return std::vector<int64_t>(B, p[0]);
  if (p.size() != B)
    throw CaseError(key, list_str(p), fmt::format("needs 1 or {} entries (one per document), got {}", B, p.size()));
  return p;
}

// Resolves offsets (explicit or derived from lens + pads) and the capacity; validates placement.
// Returns offsets with B entries; `cap` is the buffer's total rows.
// `shares_q`: the O/stats buffer name when its offsets have no capacity entry (it has the Q buffer's rows).
std::vector<int64_t> place(const std::string& off_key, const std::vector<int64_t>& given,
                           const std::string& pad_key, const std::vector<int64_t>& pad_list,
                           const std::vector<int64_t>& lens, int64_t capacity, const char* cap_key,
                           int64_t tail, int64_t& cap, const char* shares_q = nullptr) {
  const size_t B = lens.size();
  std::vector<int64_t> off;
  int64_t implied_cap = -1;
  if (!given.empty()) {
    if (!pad_list.empty())
      throw CaseError(pad_key, list_str(pad_list), fmt::format("give {} or {}, not both", pad_key, off_key));
    if (given.size() != B && given.size() != B + 1)
      throw CaseError(off_key, list_str(given),
                      fmt::format("needs {} entries (or {} with the capacity last), got {}", B, B + 1, given.size()));
    off.assign(given.begin(), given.begin() + long(B));
    if (given.size() == B + 1) implied_cap = given[B];
  } else {
    auto p = pads(pad_key, pad_list, B);
    int64_t at = 0;
    for (size_t b = 0; b < B; ++b) {
      off.push_back(at);
      at += lens[b] + p[b];
    }
    implied_cap = at;  // the last gap counts as capacity
  }
  for (size_t b = 0; b + 1 < B; ++b) {
    if (off[b + 1] < off[b])
      throw CaseError(off_key, list_str(given), fmt::format("offsets not monotone: entry {} ({}) < entry {} ({})",
                                                            b + 1, off[b + 1], b, off[b]));
    if (off[b] + lens[b] > off[b + 1])
      throw CaseError(off_key, list_str(given),
                      fmt::format("sequence {} rows [{}, {}) overlap sequence {} starting at {}", b, off[b],
                                  off[b] + lens[b], b + 1, off[b + 1]));
  }
  int64_t end = off[B - 1] + lens[B - 1];
  if (implied_cap >= 0 && capacity >= 0 && implied_cap != capacity && !given.empty())
    throw CaseError(cap_key ? cap_key : off_key, cap_key ? fmt::format("{}", capacity) : list_str(given),
                    fmt::format("disagrees with the last entry of {} ({})", off_key, implied_cap));
  if (capacity >= 0 && tail > 0) throw CaseError("tail", fmt::format("{}", tail), "give capacity or tail, not both");
  // cap_key == nullptr: the capacity is another buffer's (O/stats follow Q), not a key the user gave.
  cap = capacity >= 0 ? capacity : (implied_cap >= 0 ? implied_cap : end) + tail;
  if (end > cap && shares_q)
    throw CaseError(off_key, list_str(given),
                    fmt::format("sequence {} ends at row {}, past the {} rows of the Q buffer, which the {} buffer has "
                                "when {} gives no capacity; give {} entries with the {} capacity last",
                                B - 1, end, cap, shares_q, off_key, B + 1, shares_q));
  if (end > cap && capacity < 0 && given.size() == B + 1)
    throw CaseError(off_key, list_str(given),
                    fmt::format("sequence {} ends at row {}, past the capacity of {} rows (the last entry)", B - 1,
                                end, implied_cap));
  if (end > cap)
    throw CaseError(capacity >= 0 && cap_key ? cap_key : off_key,
                    capacity >= 0 && cap_key ? fmt::format("{}", capacity) : list_str(given),
                    fmt::format("sequence {} ends at row {}, past the capacity of {} rows", B - 1, end, cap));
  return off;
}

}  // namespace

void Layout::allowed_range(int doc, int64_t p, int64_t& lo, int64_t& hi) const {
  const int64_t kv = docs[size_t(doc)].kv_len;
  lo = 0;
  if (c.mask == MaskKind::None) {
    hi = kv;
    return;
  }
  if (c.op == Op::Indexer) {
    hi = std::clamp<int64_t>(floor_div(p + 1, c.ratio), 0, kv);
  } else {
    hi = std::clamp<int64_t>(p + 1, 0, kv);
    if (c.window > 0) lo = std::clamp<int64_t>(p - c.window + 1, 0, hi);
  }
}

Layout make_layout(const Case& in, const LayoutLimits& lim) {
  Layout l;
  l.c = in;
  Case& c = l.c;
  const size_t B = c.q_lens.size();
  if (B == 0) throw CaseError("docs", "", "at least one document is needed");
  if (c.kv_lens.size() != B)
    throw CaseError("kv_lens", list_str(c.kv_lens), fmt::format("needs {} entries like q_lens", B));
  if (c.op == Op::Sdpa && c.hq % c.hkv != 0)
    throw CaseError("hkv", fmt::format("{}", c.hkv), fmt::format("hq={} is not a multiple of hkv", c.hq));
  if (c.op == Op::Sdpa && c.window > 0 && c.mask == MaskKind::None)
    throw CaseError("window", fmt::format("{}", c.window), "a sliding window needs a causal mask");
  if (c.rank >= c.cp)
    throw CaseError("rank", fmt::format("{}", c.rank), fmt::format("must be < cp={}", c.cp));
  if (c.cp > 1) {
    for (size_t b = 0; b < B; ++b)
      if (c.q_lens[b] != c.kv_lens[b] && c.ratio == 1)
        throw CaseError("kv_lens", list_str(c.kv_lens), "context parallel needs q_lens == kv_lens (self-attention)");
    if (!c.o_offsets.empty() || !c.stats_offsets.empty())
      throw CaseError(c.o_offsets.empty() ? "stats_offsets" : "o_offsets", "",
                      "under cp > 1 outputs follow the local Q rows; explicit output offsets are not supported");
  }

  int64_t qcap = 0, kvcap = 0, ocap = 0, scap = 0;
  const bool one_capacity = c.q_capacity >= 0 && c.q_capacity == c.kv_capacity;
  const char* qcap_key = one_capacity ? "capacity" : "q_capacity";
  const char* kvcap_key = one_capacity ? "capacity" : "kv_capacity";
  const char* q_off_key = c.q_offsets == c.kv_offsets && !c.q_offsets.empty() ? "padded_offsets" : "q_offsets";
  const char* q_pad_key = c.q_pad == c.kv_pad && !c.q_pad.empty() ? "pad" : "q_pad";
  auto q_off = place(q_off_key, c.q_offsets, q_pad_key, c.q_pad, c.q_lens,
                     c.q_capacity, qcap_key, c.tail, qcap);
  auto kv_off = place(c.q_offsets == c.kv_offsets && !c.kv_offsets.empty() ? "padded_offsets" : "kv_offsets",
                      c.kv_offsets, c.q_pad == c.kv_pad && !c.kv_pad.empty() ? "pad" : "kv_pad", c.kv_pad,
                      c.kv_lens, c.kv_capacity, kvcap_key, c.tail, kvcap);
  // O/stats offsets: B entries place them in a buffer of the Q buffer's rows; B+1 give its capacity last.
  auto own_cap = [&](const std::vector<int64_t>& off) { return off.size() == B + 1 ? int64_t(-1) : qcap; };
  auto o_off = c.o_offsets.empty() ? q_off
                                   : place("o_offsets", c.o_offsets, "q_pad", {}, c.q_lens, own_cap(c.o_offsets),
                                           nullptr, 0, ocap, c.o_offsets.size() == B + 1 ? nullptr : "O");
  auto s_off = c.stats_offsets.empty() ? q_off
                                       : place("stats_offsets", c.stats_offsets, "q_pad", {}, c.q_lens,
                                               own_cap(c.stats_offsets), nullptr, 0, scap,
                                               c.stats_offsets.size() == B + 1 ? nullptr : "stats");

  int64_t pq = 0, pkv = 0;
  for (size_t b = 0; b < B; ++b) {
    DocLayout d;
    d.q_len = c.q_lens[b];
    d.kv_len = c.kv_lens[b];
    d.q_off = q_off[b];
    d.kv_off = kv_off[b];
    d.o_off = o_off[b];
    d.stats_off = s_off[b];
    d.q_padded = (b + 1 < B ? q_off[b + 1] : qcap) - q_off[b];
    d.packed_q_off = pq;
    d.packed_kv_off = pkv;
    pq += d.q_len;
    pkv += d.kv_len;
    l.docs.push_back(d);
  }
  l.kv_rows = kvcap;

  if (c.cp > 1) {
    const int64_t parts = c.cp_scheme == CpScheme::Zigzag ? 2 * c.cp : c.cp;
    for (size_t b = 0; b < B; ++b) {
      auto& d = l.docs[b];
      if (d.q_padded % parts != 0) {
        // The key that set this padded length: the capacity / tail (last document), offsets, pads, or lengths.
        const bool last = b + 1 == B;
        const bool by_cap = last && c.q_capacity >= 0, by_tail = last && !by_cap && c.tail > 0;
        const char* key = by_cap ? qcap_key : by_tail ? "tail" : !c.q_offsets.empty() ? q_off_key
                        : !c.q_pad.empty() ? q_pad_key : "docs";
        throw CaseError(key,
                        by_cap ? fmt::format("{}", c.q_capacity) : by_tail ? fmt::format("{}", c.tail)
                        : !c.q_offsets.empty() ? list_str(c.q_offsets) : !c.q_pad.empty() ? list_str(c.q_pad)
                                               : list_str(c.q_lens),
                        fmt::format("document {} has (padded) length {}, not a multiple of {} ({} cp={})", b,
                                    d.q_padded, parts, c.cp_scheme == CpScheme::Zigzag ? "2*cp for zigzag" : "cp for contiguous", c.cp));
      }
    }
    if (qcap % parts != 0)  // every padded length is a multiple, so the first offset is not
      throw CaseError(q_off_key, list_str(c.q_offsets),
                      fmt::format("the first sequence starts at row {}, not a multiple of {} under CP", q_off[0], parts));
    l.q_rows = l.o_rows = l.stats_rows = qcap / c.cp;
    for (size_t b = 0; b < B; ++b) {
      auto& d = l.docs[b];
      const int64_t local0 = d.q_off / c.cp;
      auto add = [&](int chunk, int64_t row0, int64_t len) {
        QuerySegment s;
        s.doc = int(b);
        s.chunk = chunk;
        s.row0 = s.o_row0 = s.stats_row0 = row0;
        s.tok0 = int64_t(chunk) * len;
        s.pos0 = segment_pos0(c, d, s.tok0);
        s.rows = len;
        s.valid = std::clamp<int64_t>(d.q_len - s.tok0, 0, len);
        s.key_len = c.crop ? std::clamp<int64_t>(floor_div(s.pos0 + len + c.ratio - 1, c.ratio), 0, d.kv_len) : d.kv_len;
        l.segments.push_back(s);
      };
      if (c.cp_scheme == CpScheme::Zigzag) {
        const int64_t ch = d.q_padded / (2 * c.cp);
        add(c.rank, local0, ch);
        add(2 * c.cp - 1 - c.rank, local0 + ch, ch);
      } else {
        add(c.rank, local0, d.q_padded / c.cp);
      }
    }
  } else {
    l.q_rows = qcap;
    l.o_rows = std::max(qcap, ocap);
    l.stats_rows = std::max(qcap, scap);
    for (size_t b = 0; b < B; ++b) {
      auto& d = l.docs[b];
      QuerySegment s;
      s.doc = int(b);
      s.row0 = d.q_off;
      s.o_row0 = d.o_off;
      s.stats_row0 = d.stats_off;
      s.pos0 = segment_pos0(c, d, 0);
      s.rows = s.valid = d.q_len;
      s.key_len = d.kv_len;
      l.segments.push_back(s);
    }
  }

  l.scale = c.scale > 0 ? c.scale : (c.op == Op::Indexer ? 1.0 : 1.0 / std::sqrt(double(c.dim)));

  // Memory cap before anything is allocated: inputs, backend outputs and reference outputs.
  double bytes = 0;
  if (c.op == Op::Indexer) {
    bytes = 4.0 * (double(l.q_rows) * c.heads * (c.dim + 1) + double(l.kv_rows) * c.dim) +
            2 * 8.0 * double(l.q_rows) * c.topk;
  } else {
    bytes = 4.0 * (double(l.q_rows) * c.hq * c.dim + double(l.kv_rows) * c.hkv * (c.dim + c.dim_v)) +
            2 * 4.0 * (double(l.o_rows) * c.hq * c.dim_v + double(l.stats_rows) * c.hq);
  }
  if (bytes > double(lim.max_bytes))
    throw CaseError("docs", list_str(c.q_lens),
                    fmt::format("tensors need {:.0f} bytes ({:.2f} GiB), over the memory cap of {} bytes ({:.2f} GiB, --max-mem)",
                                bytes, bytes / double(1 << 30), lim.max_bytes, double(lim.max_bytes) / double(1 << 30)));
  l.tensor_bytes = int64_t(bytes);

  l.row_segment.assign(size_t(l.q_rows), -1);
  int64_t seg_rows = 0;
  for (size_t i = 0; i < l.segments.size(); ++i) {
    const auto& s = l.segments[i];
    for (int64_t r = s.row0; r < s.row0 + s.rows; ++r) l.row_segment[size_t(r)] = int32_t(i);
    seg_rows += s.rows;
  }
  if (c.rows == 0 || c.rows >= seg_rows) {
    for (const auto& s : l.segments)
      for (int64_t r = s.row0; r < s.row0 + s.rows; ++r) l.check_rows.push_back(r);
  } else {
    std::set<int64_t> pick;
    for (const auto& s : l.segments) {  // boundary rows always: first/last row, first/last valid row
      if (s.rows == 0) continue;
      pick.insert(s.row0);
      pick.insert(s.row0 + s.rows - 1);
      if (s.valid > 0) pick.insert(s.row0 + s.valid - 1);
      if (s.valid < s.rows) pick.insert(s.row0 + s.valid);
    }
    std::vector<int64_t> all;
    for (const auto& s : l.segments)
      for (int64_t r = s.row0; r < s.row0 + s.rows; ++r) all.push_back(r);
    for (uint64_t i = 0; int64_t(pick.size()) < c.rows + 4 * int64_t(l.segments.size()) && i < uint64_t(4 * c.rows); ++i)
      pick.insert(all[counter_hash(c.seed, 99, i) % all.size()]);
    l.check_rows.assign(pick.begin(), pick.end());
  }
  return l;
}

std::string describe_layout(const Layout& l) {
  const Case& c = l.c;
  std::string s = fmt::format("case: {}\n", print_case(c));
  s += fmt::format("buffers: Q {} rows, K/V {} rows, O {} rows, stats {} rows; {:.1f} MiB of tensors\n", l.q_rows,
                   l.kv_rows, l.o_rows, l.stats_rows, double(l.tensor_bytes) / (1 << 20));
  if (l.is_cp())
    s += fmt::format("context parallel: cp={} rank={} scheme={} (Q/O rows are this rank's local buffer; K/V are "
                     "the all-gathered global buffer)\n",
                     c.cp, c.rank, c.cp_scheme == CpScheme::Zigzag ? "zigzag" : "contiguous");
  s += "documents:\n";
  for (size_t b = 0; b < l.docs.size(); ++b) {
    const auto& d = l.docs[b];
    s += fmt::format("  doc {}: q_len {} kv_len {} | K/V rows [{}, {}) | global Q offset {} padded length {}\n", b,
                     d.q_len, d.kv_len, d.kv_off, d.kv_off + d.kv_len, l.is_cp() ? d.q_off : d.q_off, d.q_padded);
  }
  s += "query segments (q_causal_offset = pos0):\n";
  for (const auto& g : l.segments) {
    int64_t lo0, hi0, lo1, hi1;
    l.allowed_range(g.doc, g.pos0, lo0, hi0);
    l.allowed_range(g.doc, g.pos0 + std::max<int64_t>(g.valid, 1) - 1, lo1, hi1);
    s += fmt::format(
        "  doc {} chunk {:>3}: Q rows [{}, {}) valid {} | positions [{}, {}) | O rows from {} | stats rows from {} "
        "| first row keys [{}, {}), last valid row keys [{}, {}) | kernel key extent {}\n",
        g.doc, g.chunk, g.row0, g.row0 + g.rows, g.valid, g.pos0, g.pos0 + g.rows, g.o_row0, g.stats_row0, lo0, hi0,
        lo1, hi1, g.key_len);
  }
  int64_t qpad = 0;
  for (auto seg : l.row_segment) qpad += seg < 0;
  int64_t kvvalid = 0;
  for (const auto& d : l.docs) kvvalid += d.kv_len;
  s += fmt::format("pad slots: Q {} rows outside segments, K/V {} rows\n", qpad, l.kv_rows - kvvalid);
  s += fmt::format("checked rows: {} of {}\n", l.check_rows.size(), l.row_segment.size() - size_t(qpad));
  return s;
}

}  // namespace ao

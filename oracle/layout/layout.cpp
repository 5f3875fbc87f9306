// Structural validation and derivation of a Layout from a Case (see layout.h for the semantics).
#include "attn_oracle/layout/layout.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/internal/rng.h"

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
  if (c.start_pos >= 0) return c.start_pos + tok0;
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

// The case keys that place one buffer's rows: offsets, pads, capacity.
struct BufferKeys {
  const char* off;
  const char* pad;
  const char* cap;
};

// Where every document's rows start in each buffer, the buffers' capacities, and the keys that set
// them (messages of later stages name those keys).
struct Placement {
  std::vector<int64_t> q_off, kv_off, o_off, s_off;
  int64_t qcap = 0, kvcap = 0, ocap = 0, scap = 0;  // ocap/scap: 0 when O/stats follow the Q rows
  BufferKeys qk{}, kvk{};
};

// The key that made a buffer's row count large: the lengths, the gaps between documents (pads or
// offsets), or the room after the last one (capacity, tail, the last pad or offset).
std::string rows_key(const Case& c, bool q_side, const std::vector<int64_t>& off, int64_t cap, const BufferKeys& k) {
  const auto& lens = q_side ? c.q_lens : c.kv_lens;
  const bool offsets_given = !(q_side ? c.q_offsets : c.kv_offsets).empty();
  double sum = 0;
  for (int64_t x : lens) sum += double(x);
  const double end = double(off.back() + lens.back());
  const double gaps = end - sum, room = double(cap) - end;
  if (sum >= gaps && sum >= room) return c.q_lens == c.kv_lens ? "docs" : q_side ? "q_lens" : "kv_lens";
  if (gaps >= room) return offsets_given ? k.off : k.pad;
  const bool cap_given = (q_side ? c.q_capacity : c.kv_capacity) >= 0;
  return cap_given ? k.cap : c.tail > 0 ? "tail" : offsets_given ? k.off : k.pad;
}

// The key's value as the canonical line shows it ("" when it is at its default).
std::string key_value(const Case& c, const std::string& key) {
  std::istringstream is(print_case(c));
  std::string tok;
  while (is >> tok)
    if (tok.size() > key.size() && tok.compare(0, key.size(), key) == 0 && tok[key.size()] == '=')
      return tok.substr(key.size() + 1);
  return "";
}

// Peak memory of a run, from the layout alone (before anything is allocated). Every part is an upper
// bound of what the harness, the CPU reference and the comparator hold at once:
//   tensors: inputs, two output sets (backend + reference, sentinel-filled), the failure artifacts;
//   per-row: row_segment, check_rows (+ the references' row blocks and the comparator's row stats),
//            the K/V token and owner maps of make_inputs / compare;
//   per-document: Case lists, DocLayout, segments, offsets (and their copies in the artifacts);
//   scratch: per thread, what the stages above hold (lim.scratch: the reference's row-block buffers,
//            the comparator's per-row sets), each stage's own figure;
//   the process baseline (binary, libraries, BLAS and OpenMP pools), measured: see test_memory_cap.cpp.
struct MemEstimate {
  double total = 0, tensors = 0, largest = 0;
  std::string what, key;
};

MemEstimate estimate_memory(const Layout& l, int64_t nsample, const LayoutLimits& lim, const Placement& p) {
  const Case& c = l.c;
  const Case d = defaults_for(c.op);
  const double Q = double(l.q_rows), KV = double(l.kv_rows), O = double(l.o_rows), ST = double(l.stats_rows);
  const double C = double(nsample), B = double(l.docs.size());
  const std::string qkey = rows_key(c, true, p.q_off, p.qcap, p.qk), kvkey = rows_key(c, false, p.kv_off, p.kvcap, p.kvk);
  const double rows_default = double(d.q_lens[0]);

  // A part is rows x widths; it grows with whichever factor is furthest above its default.
  MemEstimate e;
  auto part = [&](const char* what, double bytes, const std::string& rkey, double rows,
                  std::initializer_list<std::tuple<const char*, double, double>> widths, bool tensor) {
    e.total += bytes;
    if (tensor) e.tensors += bytes;
    if (bytes <= e.largest) return;
    e.largest = bytes;
    e.what = what;
    e.key = rkey;
    double best = rows / rows_default;
    for (const auto& [k, v, dv] : widths)
      if (v / dv > best) best = v / dv, e.key = k;
  };
  part("the per-document metadata", 1024.0 * B, "docs", B, {}, false);
  const double q_meta = Q * 4 * 2 + C * 128 + std::max(O, Q) + O + ST, kv_meta = 12 * KV;  // + K/V token/owner maps
  part("the per-row metadata", q_meta + kv_meta, q_meta >= kv_meta ? qkey : kvkey, 1, {}, false);
  const bool bwd = c.pass == Pass::Bwd;
  if (c.op == Op::Indexer) {
    const double H = c.heads, D = c.dim, K = c.topk;
    part("the Q and weight inputs", 4 * Q * H * (D + 1), qkey, Q, {{"heads", H, d.heads}, {"dim", D, d.dim}}, true);
    part("the K input", 4 * KV * D, kvkey, KV, {{"dim", D, d.dim}}, true);
    if (!bwd) {
      part("the top-k outputs (backend + reference)", 2 * 8 * Q * K, qkey, Q, {{"topk", K, d.topk}}, true);
      // The discrimination check's answer: the reference's top-k with one output replaced (discrimination.h).
      part("the discrimination check's answer", 8 * Q * K, qkey, Q, {{"topk", K, d.topk}}, false);
      part("the failure artifacts", 2 * 4 * C * K, qkey, C, {{"topk", K, d.topk}}, false);
    } else {
      // One gradient set: d_index_q, d_weights, d_index_k (fp32).
      const double set = 4 * (Q * H * (D + 1) + KV * D);
      // Slots, target, prediction (inputs) and the exact forward that picks the slots; the reference's
      // per-slot keys and dz with their error bounds (gates) and its key index: 8 x 5 per slot.
      part("the backward's slot inputs and per-slot state", 12 * Q * K + 8 * Q * K + 40 * Q * K, qkey, Q,
           {{"topk", K, d.topk}}, true);
      part("the gradient outputs (backend + reference)", 2 * set, qkey, Q, {{"heads", H, d.heads}, {"dim", D, d.dim}}, true);
      // Gates, the exact answer and the gates' rounding and underflow terms; the cell maps.
      part("the comparator's gradient sets", 3 * set + 5 * (2 * Q * H + KV) + KV, qkey, Q,
           {{"heads", H, d.heads}, {"dim", D, d.dim}}, false);
      part("the discrimination check's answer", set, qkey, Q, {{"heads", H, d.heads}, {"dim", D, d.dim}}, false);
    }
  } else {
    const double Hq = c.hq, Hkv = c.hkv, D = c.dim, Dv = c.dim_v;
    part("the Q input", 4 * Q * Hq * D, qkey, Q, {{"hq", Hq, d.hq}, {"dim", D, d.dim}}, true);
    part("the K/V inputs", 4 * KV * Hkv * (D + Dv), kvkey, KV,
         {{"hkv", Hkv, d.hq}, {"dim", D, d.dim}, {"dim_v", Dv, d.dim}}, true);
    if (!bwd) {
      part("the O and LSE outputs (backend + reference)", 2 * 4 * (O * Hq * Dv + ST * Hq), qkey, std::max(O, Q),
           {{"hq", Hq, d.hq}, {"dim_v", Dv, d.dim}}, true);
      // The exact answer in the outputs' shapes and the discrimination check's answer (discrimination.h).
      part("the discrimination check's answers", 2 * 4 * (O * Hq * Dv + ST * Hq), qkey, std::max(O, Q),
           {{"hq", Hq, d.hq}, {"dim_v", Dv, d.dim}}, false);
    } else {
      // One gradient set: dQ, dK, dV (fp32); the fp64 reference holds one in doubles while it runs.
      const double set = 4 * (Q * Hq * D + KV * Hkv * (D + Dv));
      part("the backward's inputs (dO, O, LSE)", 4 * (Q * Hq * Dv + O * Hq * Dv + ST * Hq), qkey, std::max(O, Q),
           {{"hq", Hq, d.hq}, {"dim_v", Dv, d.dim}}, true);
      part("the gradient outputs (backend + reference)", 2 * set, qkey, Q, {{"hq", Hq, d.hq}, {"dim", D, d.dim}}, true);
      // The exact answer, the emulation, the fp32 backward and the column sums' backward (with its
      // weighted dO), the fp64 reference's blocks, the floors and the cell maps.
      part("the comparator's gradient sets", 4 * set + 2 * set + 4 * Q * Hq * Dv + 8 * 3 * Q * Hq + 8 * 2 * KV * Hkv +
                                                 5 * (Q * Hq + 2 * KV * Hkv),
           qkey, Q, {{"hq", Hq, d.hq}, {"dim", D, d.dim}}, false);
      // The per-cell gates the prepared comparator keeps, and the discrimination check's answer.
      part("the discrimination check's answer", set + 8 * (Q * Hq + 2 * KV * Hkv), qkey, Q,
           {{"hq", Hq, d.hq}, {"dim", D, d.dim}}, false);
    }
  }
  if (lim.scratch) {
    // One part per `what`: its entries summed in order, growing with its largest entry's key.
    struct Merged {
      const char* what;
      std::vector<std::pair<std::string, double>> by_key;
    };
    std::vector<Merged> merged;
    for (const ScratchBytes& x : lim.scratch(l)) {
      auto m = std::find_if(merged.begin(), merged.end(), [&](const Merged& y) { return std::string(y.what) == x.what; });
      if (m == merged.end()) m = merged.insert(merged.end(), Merged{x.what, {}});
      const std::string key = x.grows_with.empty() ? kvkey : x.grows_with;
      auto k = std::find_if(m->by_key.begin(), m->by_key.end(), [&](const auto& y) { return y.first == key; });
      if (k == m->by_key.end()) m->by_key.emplace_back(key, x.per_thread);
      else k->second += x.per_thread;
    }
    const double threads = std::max(1, lim.threads);
    for (const Merged& m : merged) {
      double per_thread = 0, top = -1;
      std::string key;
      for (const auto& [k, b] : m.by_key) {
        per_thread += b;
        if (b > top) top = b, key = k;
      }
      part(m.what, threads * per_thread, key, 1, {}, false);
    }
  }
  e.total += double(kProcessBaselineBytes);
  return e;
}

// c.rows sampled rows (counter_hash of the seed) plus every segment's boundary rows, sorted; `target`
// is the number wanted (at most seg_rows). Draws a row index in [0, seg_rows) and maps it to its
// segment by binary search, so nothing of size seg_rows is built.
std::vector<int64_t> sample_rows(const Layout& l, int64_t seg_rows, int64_t target) {
  std::vector<int64_t> starts;  // first index of each segment in the concatenation of segment rows
  int64_t at = 0;
  for (const auto& g : l.segments) starts.push_back(at), at += g.rows;
  // Seen rows: a bit per segment row when that is not much more than the picks (rows= close to all
  // rows, e.g. rows=3999999 of 4M: ~16M draws), else a hash set of the picks.
  std::vector<int64_t> picked;
  const bool bitmap = seg_rows <= 64 * target;
  std::vector<bool> seen_bits(bitmap ? size_t(seg_rows) : 0);
  std::unordered_set<int64_t> seen;
  if (!bitmap) seen.reserve(size_t(target) * 2);
  auto pick_index = [&](size_t s, int64_t idx) {  // idx: row index in the concatenation of segment rows
    if (bitmap ? seen_bits[size_t(idx)] : !seen.insert(idx).second) return;
    if (bitmap) seen_bits[size_t(idx)] = true;
    picked.push_back(l.segments[s].row0 + (idx - starts[s]));
  };
  auto pick = [&](size_t s, int64_t r) { pick_index(s, starts[s] + (r - l.segments[s].row0)); };
  for (size_t s = 0; s < l.segments.size(); ++s) {  // boundary rows always: first/last row, first/last valid row
    const auto& g = l.segments[s];
    if (g.rows == 0) continue;
    pick(s, g.row0);
    pick(s, g.row0 + g.rows - 1);
    if (g.valid > 0) pick(s, g.row0 + g.valid - 1);
    if (g.valid < g.rows) pick(s, g.row0 + g.valid);
  }
  for (uint64_t i = 0; int64_t(picked.size()) < target && i < uint64_t(4 * l.c.rows); ++i) {
    const int64_t idx = int64_t(counter_hash(l.c.seed, 99, i) % uint64_t(seg_rows));
    pick_index(size_t(std::upper_bound(starts.begin(), starts.end(), idx) - starts.begin() - 1), idx);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

}  // namespace

void sdpa_window_band(WindowConvention conv, int64_t kv, int64_t p, int64_t left, int64_t right, int64_t& lo,
                      int64_t& hi) {
  const bool fa = conv == WindowConvention::Fa;
  hi = right < 0 ? kv : std::clamp<int64_t>(p + 1 + right, 0, kv);
  lo = 0;
  if (left > 0 || (left == 0 && fa)) lo = std::clamp<int64_t>(fa ? p - left : p - left + 1, 0, hi);
}

void Layout::allowed_range(int doc, int64_t p, int64_t& lo, int64_t& hi) const {
  const int64_t kv = docs[size_t(doc)].kv_len;
  lo = 0;
  if (c.mask == MaskKind::None) {
    hi = kv;
    return;
  }
  if (c.op == Op::Indexer)
    hi = std::clamp<int64_t>(floor_div(p + 1, c.ratio), 0, kv);
  else
    sdpa_window_band(c.window_convention, kv, p, c.window, c.window_right, lo, hi);
}

int64_t buffer_rows(const Layout& l, RowBuffer b) {
  switch (b) {
    case RowBuffer::Q: return l.q_rows;
    case RowBuffer::O: return l.o_rows;
    case RowBuffer::Stats: return l.stats_rows;
    case RowBuffer::KV: return l.kv_rows;
  }
  return 0;
}

std::vector<char> valid_rows(const Layout& l, RowBuffer b) {
  std::vector<char> v(size_t(buffer_rows(l, b)), 0);
  for_each_valid_row(l, b, [&](int64_t, int64_t r) { v[size_t(r)] = 1; });
  return v;
}

namespace {

// Stage 1, validate: key combinations that a later stage would accept and then silently ignore or
// mis-place are refused here, before anything is derived (parse_case refuses the explicit ones too;
// this also covers Cases built in code: generator, shrinker, tests).
void validate(const Case& c) {
  const size_t B = c.q_lens.size();
  if (B == 0) throw CaseError("docs", "", "at least one document is needed");
  if (c.kv_lens.size() != B)
    throw CaseError("kv_lens", list_str(c.kv_lens), fmt::format("needs {} entries like q_lens", B));
  if (c.pass == Pass::Fwd && c.grad_pad != GradPad::Untouched)
    throw CaseError("grad_pad", to_string(c.grad_pad), "applies to the backward's gradients only (pass=bwd)");
  if (c.pass == Pass::Bwd && c.op == Op::Sdpa) {  // forward-only keys: refused rather than ignored
    if (c.num_splits != 1)
      throw CaseError("num_splits", fmt::format("{}", c.num_splits), "split-KV is a forward key (pass=fwd)");
    for (auto [k, v] : {std::pair{"atol", c.atol}, {"rtol", c.rtol}, {"lse_tol", c.lse_tol}})
      if (v >= 0) throw CaseError(k, fmt::format("{}", v), "a forward tolerance (pass=bwd derives its gates)");
  }
  if (c.loss_mean != LossMean::Rows && !(c.op == Op::Indexer && c.pass == Pass::Bwd))
    throw CaseError("loss_mean", to_string(c.loss_mean), "applies only to op=indexer pass=bwd (the training loss)");
  if (c.op == Op::Indexer && c.pass == Pass::Bwd) {
    // The loss and d_index_k sum over every row: a sample of rows would leave both undefined.
    if (c.rows != 0)
      throw CaseError("rows", fmt::format("{}", c.rows), "pass=bwd judges every row (the loss and d_index_k sum over all)");
    if (c.min_recall >= 0 || c.score_tol >= 0)  // the forward's top-k gates: nothing to act on
      throw CaseError(c.min_recall >= 0 ? "min_recall" : "score_tol", "", "applies only to pass=fwd (the top-k's gates)");
  }
  if (c.op == Op::Sdpa && (c.hq < 1 || c.hkv < 1))  // defaults_for leaves hkv=0 for parse_case to resolve
    throw CaseError(c.hq < 1 ? "hq" : "hkv", fmt::format("{}", c.hq < 1 ? c.hq : c.hkv), "must be >= 1");
  if (c.op == Op::Sdpa && c.hq % c.hkv != 0)
    throw CaseError("hkv", fmt::format("{}", c.hkv), fmt::format("hq={} is not a multiple of hkv", c.hq));
  if (c.op == Op::Sdpa && c.mask == MaskKind::None) {  // the mask gives the band its alignment
    if (c.window != 0)
      throw CaseError("window", fmt::format("{}", c.window),
                      "a sliding window needs a causal mask");
    if (c.window_right != 0)
      throw CaseError("window_right", fmt::format("{}", c.window_right),
                      "a window bound needs a mask for its alignment (mask=topleft|bottomright)");
    if (c.window_convention != WindowConvention::Cudnn)
      throw CaseError("window_convention", "fa", "reads the window bounds; with mask=none there is no band");
  }
  if (c.op == Op::Indexer && (c.window != 0 || c.window_right != 0 || c.window_convention != WindowConvention::Cudnn ||
                              c.num_splits != 1 || c.empty_rows != EmptyRows::NegInf))
    throw CaseError(c.window ? "window" : c.window_right ? "window_right" : c.num_splits != 1 ? "num_splits"
                    : c.empty_rows != EmptyRows::NegInf ? "empty_rows" : "window_convention", "",
                    "applies only to op=sdpa");
  if (c.op == Op::Sdpa && (c.start_pos >= 0 || c.ties != Ties::Set))
    throw CaseError(c.start_pos >= 0 ? "start_pos" : "ties", "", "applies only to op=indexer");
  if (c.start_pos >= 0 && c.mask == MaskKind::None)
    throw CaseError("start_pos", fmt::format("{}", c.start_pos),
                    "places the causal positions; with mask=none every key is allowed (use a causal mask)");
  if (c.values != Values::Normal && c.probe != Probe::None)
    throw CaseError("values", to_string(c.values), "and probe=edges both set the inputs: give one of them");
  if (c.op == Op::Sdpa && (c.values == Values::Plateau || c.values == Values::Clustered))
    throw CaseError("values", to_string(c.values), "applies only to op=indexer (it shapes ReLU top-k scores)");
  for (const auto& [key, seqlen, lens] : {std::tuple{"max_seqlen_q", c.max_seqlen_q, &c.q_lens},
                                          std::tuple{"max_seqlen_kv", c.max_seqlen_kv, &c.kv_lens}}) {
    const int64_t longest = lens->empty() ? 0 : *std::max_element(lens->begin(), lens->end());
    if (seqlen != 0 && seqlen < longest)
      throw CaseError(key, fmt::format("{}", seqlen), fmt::format("must be >= the longest length {}", longest));
  }
  if (c.rank >= c.cp)
    throw CaseError("rank", fmt::format("{}", c.rank), fmt::format("must be < cp={}", c.cp));
  // Keys that would be accepted and silently ignored (parse_case rejects them too when given explicitly).
  if (c.cp == 1 && c.crop) throw CaseError("crop", "1", "applies only under context parallelism (cp > 1)");
  if (c.cp == 1 && c.cp_scheme != CpScheme::Zigzag)
    throw CaseError("cp_scheme", "contiguous", "applies only under context parallelism (cp > 1)");
  if (c.crop && c.mask == MaskKind::None)
    throw CaseError("crop", "1", "crops keys at the causal chunk end; with mask=none every key is allowed");
  if (c.crop && c.window_right != 0)  // key_len = the chunk's causal end, which a right bound moves
    throw CaseError("crop", "1",
                    fmt::format("crops keys at the causal chunk end; with window_right={} rows are allowed keys past it",
                                c.window_right));
  if (c.op == Op::Indexer && c.ratio > 1 && c.mask == MaskKind::None)
    throw CaseError("ratio", fmt::format("{}", c.ratio),
                    "compresses the causal key range; with mask=none every key is allowed (use a causal mask)");
  if (c.op == Op::Indexer && (!c.o_offsets.empty() || !c.stats_offsets.empty()))
    throw CaseError(c.o_offsets.empty() ? "stats_offsets" : "o_offsets",
                    list_str(c.o_offsets.empty() ? c.stats_offsets : c.o_offsets),
                    "applies only to op=sdpa (the indexer's outputs follow the Q rows)");
  if (c.op == Op::Indexer && c.probe != Probe::None)
    throw CaseError("probe", "edges", "applies only to op=sdpa (the indexer's inputs are not probed)");
  if (c.cp > 1) {
    for (size_t b = 0; b < B; ++b)
      if (c.q_lens[b] != c.kv_lens[b] && c.ratio == 1)
        throw CaseError("kv_lens", list_str(c.kv_lens), "context parallel needs q_lens == kv_lens (self-attention)");
    if (!c.o_offsets.empty() || !c.stats_offsets.empty())
      throw CaseError(c.o_offsets.empty() ? "stats_offsets" : "o_offsets", "",
                      "under cp > 1 outputs follow the local Q rows; explicit output offsets are not supported");
  }
}

// Stage 2, place buffers: offsets (explicit, or derived from lengths + pads) and capacities of the
// Q, K/V, O and stats buffers, resolved once; each document's rows recorded in l.docs. Later stages
// read this placement (and name its keys) instead of re-deriving it.
Placement place_buffers(Layout& l) {
  const Case& c = l.c;
  const size_t B = c.q_lens.size();
  Placement p;
  const bool one_capacity = c.q_capacity >= 0 && c.q_capacity == c.kv_capacity;
  const char* qcap_key = one_capacity ? "capacity" : "q_capacity";
  const char* kvcap_key = one_capacity ? "capacity" : "kv_capacity";
  const char* q_off_key = c.q_offsets == c.kv_offsets && !c.q_offsets.empty() ? "padded_offsets" : "q_offsets";
  const char* q_pad_key = c.q_pad == c.kv_pad && !c.q_pad.empty() ? "pad" : "q_pad";
  p.q_off = place(q_off_key, c.q_offsets, q_pad_key, c.q_pad, c.q_lens, c.q_capacity, qcap_key, c.tail, p.qcap);
  const char* kv_off_key = c.q_offsets == c.kv_offsets && !c.kv_offsets.empty() ? "padded_offsets" : "kv_offsets";
  const char* kv_pad_key = c.q_pad == c.kv_pad && !c.kv_pad.empty() ? "pad" : "kv_pad";
  p.kv_off = place(kv_off_key, c.kv_offsets, kv_pad_key, c.kv_pad, c.kv_lens, c.kv_capacity, kvcap_key, c.tail,
                   p.kvcap);
  // O/stats offsets: B entries place them in a buffer of the Q buffer's rows; B+1 give its capacity last.
  auto own_cap = [&](const std::vector<int64_t>& off) { return off.size() == B + 1 ? int64_t(-1) : p.qcap; };
  p.o_off = c.o_offsets.empty() ? p.q_off
                                : place("o_offsets", c.o_offsets, "q_pad", {}, c.q_lens, own_cap(c.o_offsets), nullptr,
                                        0, p.ocap, c.o_offsets.size() == B + 1 ? nullptr : "O");
  p.s_off = c.stats_offsets.empty() ? p.q_off
                                    : place("stats_offsets", c.stats_offsets, "q_pad", {}, c.q_lens,
                                            own_cap(c.stats_offsets), nullptr, 0, p.scap,
                                            c.stats_offsets.size() == B + 1 ? nullptr : "stats");
  p.qk = {q_off_key, q_pad_key, qcap_key};
  p.kvk = {kv_off_key, kv_pad_key, kvcap_key};

  int64_t pq = 0, pkv = 0;
  for (size_t b = 0; b < B; ++b) {
    DocLayout d;
    d.q_len = c.q_lens[b];
    d.kv_len = c.kv_lens[b];
    d.q_off = p.q_off[b];
    d.kv_off = p.kv_off[b];
    d.o_off = p.o_off[b];
    d.stats_off = p.s_off[b];
    d.q_padded = (b + 1 < B ? p.q_off[b + 1] : p.qcap) - p.q_off[b];
    d.packed_q_off = pq;
    d.packed_kv_off = pkv;
    pq += d.q_len;
    pkv += d.kv_len;
    l.docs.push_back(d);
  }
  l.kv_rows = p.kvcap;
  return p;
}

// Stage 3, cut segments: the query rows this rank holds, as contiguous runs with their causal offset
// (what a kernel gets as cu_seqlens / q_causal_offsets); zigzag/contiguous CP chunks or one run per
// document. Every per-row helper (seg_of, pos_of, valid_row) resolves through these.
void cut_segments(Layout& l, const Placement& p) {
  const Case& c = l.c;
  const size_t B = c.q_lens.size();
  if (c.cp > 1) {
    const int64_t parts = c.cp_scheme == CpScheme::Zigzag ? 2 * c.cp : c.cp;
    for (size_t b = 0; b < B; ++b) {
      auto& d = l.docs[b];
      if (d.q_padded % parts != 0) {
        // The key that set this padded length: the capacity / tail (last document), offsets, pads, or lengths.
        const bool last = b + 1 == B;
        const bool by_cap = last && c.q_capacity >= 0, by_tail = last && !by_cap && c.tail > 0;
        const char* key = by_cap ? p.qk.cap : by_tail ? "tail" : !c.q_offsets.empty() ? p.qk.off
                        : !c.q_pad.empty() ? p.qk.pad : "docs";
        throw CaseError(key,
                        by_cap ? fmt::format("{}", c.q_capacity) : by_tail ? fmt::format("{}", c.tail)
                        : !c.q_offsets.empty() ? list_str(c.q_offsets) : !c.q_pad.empty() ? list_str(c.q_pad)
                                               : list_str(c.q_lens),
                        fmt::format("document {} has (padded) length {}, not a multiple of {} ({} cp={})", b,
                                    d.q_padded, parts, c.cp_scheme == CpScheme::Zigzag ? "2*cp for zigzag" : "cp for contiguous", c.cp));
      }
    }
    if (p.qcap % parts != 0)  // every padded length is a multiple, so the first offset is not
      throw CaseError(p.qk.off, list_str(c.q_offsets),
                      fmt::format("the first sequence starts at row {}, not a multiple of {} under CP", p.q_off[0], parts));
    l.q_rows = l.o_rows = l.stats_rows = p.qcap / c.cp;
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
    l.q_rows = p.qcap;
    l.o_rows = std::max(p.qcap, p.ocap);
    l.stats_rows = std::max(p.qcap, p.scap);
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
}

// How many rows the oracle checks: all segment rows, or c.rows sampled plus boundary rows. The budget
// needs the count before the rows are picked.
struct CheckPlan {
  int64_t seg_rows = 0, nsample = 0;
  bool all_rows = true;
};

CheckPlan plan_check_rows(const Layout& l) {
  CheckPlan plan;
  for (const auto& g : l.segments) plan.seg_rows += g.rows;
  plan.all_rows = l.c.rows == 0 || l.c.rows >= plan.seg_rows;
  plan.nsample = plan.all_rows ? plan.seg_rows
                               : std::min<int64_t>(plan.seg_rows, l.c.rows + 4 * int64_t(l.segments.size()));
  return plan;
}

// Stage 4, check the budget: the peak memory of a run is estimated from the layout alone and a case
// over --max-mem is refused (naming the key that made it large) before anything of its size exists.
void check_budget(Layout& l, const Placement& p, const CheckPlan& plan, const LayoutLimits& lim) {
  const Case& c = l.c;
  const MemEstimate est = estimate_memory(l, plan.nsample, lim, p);
  l.tensor_bytes = int64_t(est.tensors);
  if (est.total > double(lim.max_bytes))
    throw CaseError(est.key, key_value(c, est.key),
                    fmt::format("the case needs about {:.0f} bytes ({:.2f} GiB) at peak, largest part {} ({:.2f} GiB, "
                                "grows with '{}'); over the memory cap of {} bytes ({:.2f} GiB, --max-mem)",
                                est.total, est.total / double(1 << 30), est.what, est.largest / double(1 << 30),
                                est.key, lim.max_bytes, double(lim.max_bytes) / double(1 << 30)));
  l.mem_bytes = int64_t(est.total);
}

// Stage 5, sample check rows: the rows the comparator judges (every segment row, or the sample plus
// every segment's boundary rows), and the row -> segment map; Describe mode keeps only the count, so
// `show` and corpus validation stay O(documents + sampled rows).
void pick_check_rows(Layout& l, const CheckPlan& plan, LayoutMode mode) {
  if (plan.all_rows) {
    l.check_row_count = plan.seg_rows;
    if (mode == LayoutMode::Full) {
      l.check_rows.reserve(size_t(plan.seg_rows));
      for (const auto& g : l.segments)
        for (int64_t r = g.row0; r < g.row0 + g.rows; ++r) l.check_rows.push_back(r);
    }
  } else {
    l.check_rows = sample_rows(l, plan.seg_rows, plan.nsample);
    l.check_row_count = int64_t(l.check_rows.size());
    if (mode != LayoutMode::Full) std::vector<int64_t>().swap(l.check_rows);
  }
  if (mode == LayoutMode::Full) {
    l.row_segment.assign(size_t(l.q_rows), -1);
    for (size_t i = 0; i < l.segments.size(); ++i) {
      const auto& g = l.segments[i];
      std::fill_n(l.row_segment.begin() + g.row0, g.rows, int32_t(i));
    }
  }
}

}  // namespace

Case kernel_case(const Layout& l) {
  Case c = l.c;
  c.scale = l.scale;
  c.max_seqlen_q = l.max_seqlen_q;
  c.max_seqlen_kv = l.max_seqlen_kv;
  return c;
}

// The stages in order; each may throw CaseError naming the key, and none is skipped in Describe mode
// (validation must be the same whatever the mode).
Layout make_layout(const Case& in, const LayoutLimits& lim, LayoutMode mode) {
  Layout l;
  l.c = in;
  validate(l.c);
  const Placement p = place_buffers(l);
  cut_segments(l, p);
  l.scale = l.c.scale > 0 ? l.c.scale : (l.c.op == Op::Indexer ? 1.0 : 1.0 / std::sqrt(double(l.c.dim)));
  for (const auto& d : l.docs) {
    l.max_seqlen_q = std::max(l.max_seqlen_q, d.q_len);
    l.max_seqlen_kv = std::max(l.max_seqlen_kv, d.kv_len);
  }
  if (l.c.max_seqlen_q > 0) l.max_seqlen_q = l.c.max_seqlen_q;
  if (l.c.max_seqlen_kv > 0) l.max_seqlen_kv = l.c.max_seqlen_kv;
  l.split_len = std::max<int64_t>(1, (l.max_seqlen_kv + l.c.num_splits - 1) / l.c.num_splits);
  const CheckPlan plan = plan_check_rows(l);
  check_budget(l, p, plan, lim);
  pick_check_rows(l, plan, mode);
  return l;
}

}  // namespace ao

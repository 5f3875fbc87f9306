// Cross-check of the production references (ao::reference_indexer / ao::reference_sdpa through
// make_layout / make_inputs / make_sentinel_outputs) against the independent naive fp64 reference
// (naive_reference.h) on random layouts generated from recorded seeds, at precision=fp32 and fp64.
//
// Documented tolerances (the naive fp64 result is the truth):
//  * SDPA: |O - O_naive| <= 1e-4 (fp32 reference) / 1e-9 + 2^-24 |O_naive| (fp64: the output
//    buffers are fp32, so the fp64 result is checked as a correctly rounded fp32 of a value within
//    1e-9), |LSE - LSE_naive| likewise. Rows with no allowed key: O == 0 and LSE == -inf exactly.
//  * Indexer: the returned index set equals the naive top-k set, except that a key in the symmetric
//    difference is accepted when its naive fp64 score ties with the naive k-th score: within
//    1e-4 * M (fp32 reference), 1e-12 * M (fp64), M = scale * sum_h |w_h| * sum_d |q_hd k_d| (the
//    magnitude a floating-point evaluation's rounding error is relative to; max over the two keys).
//    fp64 cannot demand bit-exact ties: with levels=3 the inputs are multiples of 2/3 (not dyadic),
//    and Eigen's and the naive loop's summation orders then differ in the last ulp (seen: 1 ulp).
//    Returned scores: |score - naive| <= 1e-5 * M + 2^-23 |naive| (fp32) / 1e-12 * M + 2^-24 |naive|
//    (fp64; the output buffer is fp32). The -1 fill is exact: k - min(k, allowed) trailing -1 with
//    score -inf, pad rows inside CP chunks all -1.
//  * Everything the oracle must not write stays sentinel exactly: Q/O/stats rows outside the checked
//    rows (pad slots, rows= sampling), SDPA pad rows inside CP chunks.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/reference/reference.h"
#include "naive_reference.h"

using namespace ao;

namespace {

constexpr int kCasesPerFamily = 20;  // 12 families per op: 240 layouts per op
constexpr uint64_t kGenSeed = 0x5eed2026;

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t s) : rng(s) {}
  int64_t uni(int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(rng); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  template <class T>
  T pick(std::initializer_list<T> xs) { return *(xs.begin() + uni(0, int64_t(xs.size()) - 1)); }
};

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  return s;
}

// Random document lengths; some are empty.
std::vector<int64_t> lens(Gen& g, int64_t B, int64_t max_len, double p_empty = 0.1) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b) v.push_back(g.coin(p_empty) ? 0 : g.uni(1, max_len));
  return v;
}

std::string common(Gen& g) {
  std::string s = fmt::format(" dtype={} seed={} poison={}", g.pick({"fp32", "bf16", "fp16"}), g.uni(0, 1 << 30),
                              g.pick({"nan", "inf", "large", "none"}));
  if (g.coin(0.2)) s += fmt::format(" scale={}", g.pick({0.125, 0.5, 0.0883883476, 1.0}));
  return s;
}

// CP part shared by both ops: zigzag/contiguous, padded lengths (chunks partly/wholly padding),
// explicit padded offsets, kv padding different from q padding.
std::string cp_layout(Gen& g, int family_kind, bool indexer, int ratio) {
  const int cp = int(g.pick<int64_t>({2, 3, 4, 8}));
  const bool zig = family_kind != 1;
  const int64_t parts = zig ? 2 * cp : cp;
  const int64_t B = g.uni(1, 4);
  std::vector<int64_t> ql, kvl, qpad, kvpad;
  for (int64_t b = 0; b < B; ++b) {
    int64_t L, P;
    if (family_kind == 2) {  // padded CP: any valid length, padded up, sometimes by whole chunks
      L = g.coin(0.1) ? 0 : g.uni(1, 6 * parts);
      P = (L + parts - 1) / parts * parts + (g.coin(0.3) ? parts * g.uni(1, 2) : 0);
      if (P == 0) P = parts;
    } else {
      L = parts * g.uni(1, std::max<int64_t>(1, 96 / parts));
      P = L;
    }
    ql.push_back(L);
    qpad.push_back(P - L);
    kvl.push_back(ratio > 1 ? std::max<int64_t>(0, L / ratio + g.uni(-1, 1)) : L);
    kvpad.push_back(g.uni(0, 5));
  }
  std::string s = fmt::format(" cp={} rank={}", cp, g.uni(0, cp - 1));
  if (!zig) s += " cp_scheme=contiguous";
  if (ratio > 1) s += fmt::format(" ratio={}", ratio);
  const bool crop = g.coin(0.3);
  if (crop) s += " crop=1";
  if (indexer && g.coin(0.4)) {  // positions stay absolute; crop and ratio need a causal mask
    const bool none = g.coin() ? false : !crop && ratio == 1;
    s += none ? " mask=none" : " mask=topleft";
  }
  if (!indexer && g.coin(0.3)) s += fmt::format(" window={}", g.uni(1, 40));
  if (ql == kvl)
    s += " docs=" + list(ql);
  else
    s += " q_lens=" + list(ql) + " kv_lens=" + list(kvl);
  const bool any_qpad = std::any_of(qpad.begin(), qpad.end(), [](int64_t x) { return x > 0; });
  if (g.coin(0.3)) {  // explicit offsets, first document not at row 0
    std::vector<int64_t> qo, ko;
    int64_t at = parts * g.uni(0, 1), kat = g.uni(0, 3);
    for (int64_t b = 0; b < B; ++b) {
      qo.push_back(at);
      at += ql[size_t(b)] + qpad[size_t(b)];
      ko.push_back(kat);
      kat += kvl[size_t(b)] + kvpad[size_t(b)];
    }
    qo.push_back(at);
    s += " q_offsets=" + list(qo) + " kv_offsets=" + list(ko);
  } else {
    if (any_qpad) s += " q_pad=" + list(qpad);
    if (g.coin(0.5)) s += " kv_pad=" + list(kvpad);
    if (g.coin(0.3)) s += fmt::format(" tail={}", parts * g.uni(1, 2));
  }
  return s;
}

std::string gen_indexer(uint64_t seed, int fam) {
  Gen g(seed);
  std::string s = "op=indexer";
  s += fmt::format(" heads={} dim={}", g.pick<int64_t>({1, 2, 4, 8}), g.pick<int64_t>({8, 16, 32, 64}));
  const std::string mask = g.pick({"topleft", "bottomright", "bottomright", "none"});
  int64_t topk = g.pick<int64_t>({1, 2, 7, 16, 40, 100, 300});
  switch (fam) {
    case 0: s += " docs=" + list(lens(g, g.uni(1, 5), 120)) + " mask=" + mask; break;  // multi-doc pack
    case 1: {  // gaps: q and kv padding differ, tail capacity
      const int64_t B = g.uni(1, 4);
      s += " docs=" + list(lens(g, B, 100)) + " q_pad=" + list(lens(g, B, 9, 0.3)) +
           " kv_pad=" + list(lens(g, B, 9, 0.3)) + fmt::format(" tail={} mask={}", g.uni(0, 17), mask);
      break;
    }
    case 2: {  // explicit offsets (first sequence not at row 0), capacities
      const int64_t B = g.uni(1, 4);
      auto q = lens(g, B, 90), kv = lens(g, B, 90);
      std::vector<int64_t> qo, ko;
      int64_t qa = g.uni(0, 7), ka = g.uni(0, 7);
      for (int64_t b = 0; b < B; ++b) {
        qo.push_back(qa);
        ko.push_back(ka);
        qa += q[size_t(b)] + g.uni(0, 6);
        ka += kv[size_t(b)] + g.uni(0, 6);
      }
      if (g.coin()) qo.push_back(qa + g.uni(0, 4));
      s += " q_lens=" + list(q) + " kv_lens=" + list(kv) + " q_offsets=" + list(qo) + " kv_offsets=" + list(ko);
      if (g.coin(0.4)) s += fmt::format(" kv_capacity={}", ka + g.uni(0, 9));
      s += " mask=" + mask;
      break;
    }
    case 3: {  // q_len != kv_len, both alignments; chunked prefill (start_pos)
      const int64_t B = g.uni(1, 4);
      s += " q_lens=" + list(lens(g, B, 100)) + " kv_lens=" + list(lens(g, B, 100)) + " mask=" + mask;
      if (mask != "none" && g.coin(0.4)) s += fmt::format(" start_pos={}", g.uni(0, 120));
      break;
    }
    case 4: {  // key compression ratio > 1
      const int64_t B = g.uni(1, 4), ratio = g.uni(2, 4);
      auto q = lens(g, B, 160);
      std::vector<int64_t> kv;
      for (int64_t x : q) kv.push_back(std::max<int64_t>(0, x / ratio + g.uni(-2, 2)));
      s += " q_lens=" + list(q) + " kv_lens=" + list(kv) +
           fmt::format(" ratio={} mask={}", ratio, mask == "none" ? "topleft" : mask);  // ratio: causal only
      break;
    }
    case 5: s += cp_layout(g, 0, true, 1); break;  // zigzag CP
    case 6: s += cp_layout(g, 1, true, 1); break;  // contiguous CP
    case 7: s += cp_layout(g, 2, true, 1); break;  // padded CP: chunks partly/wholly padding
    case 8: s += cp_layout(g, g.coin() ? 0 : 2, true, int(g.uni(2, 4))); break;  // CP with ratio
    case 9:  // ties: few distinct input values
      s += " docs=" + list(lens(g, g.uni(1, 3), 120)) + fmt::format(" levels={}", g.pick<int64_t>({3, 4, 8, 16, 64}));
      if (g.coin()) s += cp_layout(g, 0, true, 1).substr(0, 0);  // keep the generator stream stable
      break;
    case 10: {  // top-k above / below the allowed counts
      auto q = lens(g, g.uni(1, 3), 80);
      const int64_t mx = *std::max_element(q.begin(), q.end());
      topk = g.pick<int64_t>({1, std::max<int64_t>(1, mx / 2), std::max<int64_t>(1, mx), mx + 1, 4 * mx + 3});
      s += " docs=" + list(q) + " mask=" + mask;
      if (g.coin(0.5)) s += std::string(" values=") + g.pick({"extreme", "plateau", "clustered"});
      break;
    }
    case 11: {  // rows= sampling on larger documents
      // Documents past the reference's 512-key tile.
      s += " docs=" + list(lens(g, g.uni(1, 3), 1300, 0)) + fmt::format(" rows={}", g.uni(1, 40));
      if (g.coin(0.4)) s = "op=indexer heads=2 dim=16" + cp_layout(g, 2, true, 1) + fmt::format(" rows={}", g.uni(1, 20));
      break;
    }
  }
  s += fmt::format(" topk={}", topk) + common(g);
  return s;
}

std::string gen_sdpa(uint64_t seed, int fam) {
  Gen g(seed);
  std::string s = "op=sdpa";
  const int64_t hkv = g.pick<int64_t>({1, 2, 3}), grp = g.pick<int64_t>({1, 2, 4});
  s += fmt::format(" hq={} hkv={} dim={}", hkv * grp, hkv, g.pick<int64_t>({8, 16, 32, 64}));
  if (g.coin(0.3)) s += fmt::format(" dim_v={}", g.pick<int64_t>({4, 8, 24}));
  const std::string mask = g.pick({"topleft", "bottomright", "none"});
  const std::string causal = g.pick({"topleft", "bottomright"});
  switch (fam) {
    case 0: s += " docs=" + list(lens(g, g.uni(1, 5), 100)) + " mask=" + mask; break;
    case 1: {
      const int64_t B = g.uni(1, 4);
      s += " docs=" + list(lens(g, B, 90)) + " q_pad=" + list(lens(g, B, 9, 0.3)) +
           " kv_pad=" + list(lens(g, B, 9, 0.3)) + fmt::format(" tail={} mask={}", g.uni(0, 17), mask);
      break;
    }
    case 2: {  // explicit per-tensor offsets, O and stats placed differently from Q
      const int64_t B = g.uni(1, 4);
      auto q = lens(g, B, 80), kv = lens(g, B, 80);
      std::vector<int64_t> qo, ko, oo, so;
      int64_t qa = g.uni(0, 5), ka = g.uni(0, 5);
      for (int64_t b = 0; b < B; ++b) {
        qo.push_back(qa);
        ko.push_back(ka);
        qa += q[size_t(b)] + g.uni(0, 6);
        ka += kv[size_t(b)] + g.uni(0, 6);
      }
      const int64_t qcap = qa + g.uni(0, 5);
      // O / stats: packed from a random start, within the Q capacity.
      int64_t total = 0;
      for (int64_t x : q) total += x;
      int64_t oa = g.uni(0, qcap - total), sa = g.uni(0, qcap - total);
      for (int64_t b = 0; b < B; ++b) {
        oo.push_back(oa);
        so.push_back(sa);
        oa += q[size_t(b)];
        sa += q[size_t(b)];
      }
      s += " q_lens=" + list(q) + " kv_lens=" + list(kv) + " q_offsets=" + list(qo) + " kv_offsets=" + list(ko) +
           fmt::format(" q_capacity={}", qcap) + " mask=" + mask;
      if (g.coin(0.7)) s += " o_offsets=" + list(oo);
      if (g.coin(0.7)) s += " stats_offsets=" + list(so);
      break;
    }
    case 3: {
      const int64_t B = g.uni(1, 4);
      s += " q_lens=" + list(lens(g, B, 90)) + " kv_lens=" + list(lens(g, B, 90)) + " mask=" + causal;
      break;
    }
    case 4: {  // sliding window
      const int64_t B = g.uni(1, 4);
      auto q = lens(g, B, 90);
      s += (g.coin() ? " docs=" + list(q) : " q_lens=" + list(q) + " kv_lens=" + list(lens(g, B, 90))) +
           fmt::format(" window={} mask={}", g.pick<int64_t>({1, 2, 5, 17, 64}), causal);
      if (g.coin(0.6)) {  // two-sided bands, FlashAttention's convention, the -1 sentinel
        s = s.substr(0, s.rfind(" window=")) +
            fmt::format(" window={} window_right={} mask={}", g.pick<int64_t>({-1, 0, 1, 3, 17}),
                        g.pick<int64_t>({-1, 0, 1, 4, 30}), causal);
        if (g.coin()) s += " window_convention=fa";
      }
      break;
    }
    case 5:  // GQA / MQA with many heads
      s = fmt::format("op=sdpa hq={} hkv={} dim=16", g.pick<int64_t>({8, 12}), g.pick<int64_t>({1, 2, 4})) +
          " docs=" + list(lens(g, g.uni(1, 3), 80)) + " mask=" + mask;
      if (g.coin(0.3)) s += " values=extreme";
      break;
    case 6: s += cp_layout(g, 0, false, 1) + " mask=" + causal; break;
    case 7: s += cp_layout(g, 1, false, 1) + " mask=" + causal; break;
    case 8: s += cp_layout(g, 2, false, 1) + " mask=" + causal; break;
    case 9: {  // no-key rows: empty kv documents, q longer than kv with bottom-right, windows past kv
      const int64_t B = g.uni(2, 4);
      auto q = lens(g, B, 60, 0);
      std::vector<int64_t> kv;
      for (int64_t x : q) kv.push_back(g.coin(0.3) ? 0 : g.uni(0, std::max<int64_t>(0, x - 1)));
      s += " q_lens=" + list(q) + " kv_lens=" + list(kv) + " mask=" + causal;
      if (g.coin()) s += fmt::format(" window={}", g.uni(1, 8));
      if (g.coin(0.3)) s += " empty_rows=posinf";
      break;
    }
    case 10:  // larger head dims (an explicit scale comes from common())
      s = std::string("op=sdpa hq=2 hkv=1 dim=128 dim_v=64") +
          " docs=" + list(lens(g, g.uni(1, 3), 90)) + " mask=" + mask;
      break;
    case 11: {
      s += " docs=" + list(lens(g, g.uni(1, 3), 400, 0)) + fmt::format(" rows={}", g.uni(1, 40));
      if (g.coin(0.4)) s = "op=sdpa hq=2 hkv=1 dim=16" + cp_layout(g, 2, false, 1) + fmt::format(" rows={}", g.uni(1, 20));
      break;
    }
  }
  s += common(g);
  return s;
}

// Layout-level agreement, and the set of rows the production path chose to check.
void check_layout(const Layout& l, const naive::NaiveLayout& nl) {
  ASSERT_EQ(l.q_rows, nl.q_rows);
  ASSERT_EQ(l.kv_rows, nl.kv_cap);
  ASSERT_EQ(l.row_segment.size(), size_t(nl.q_rows));
  for (int64_t r = 0; r < nl.q_rows; ++r) {
    const int o = nl.row_owner[size_t(r)];
    ASSERT_EQ(l.row_segment[size_t(r)] >= 0, o >= 0) << "Q row " << r;
    if (o < 0) continue;
    const auto& nr = nl.rows[size_t(o)];
    ASSERT_EQ(l.pos_of(r), nr.pos) << "Q row " << r;
    ASSERT_EQ(l.valid_row(r), nr.valid) << "Q row " << r;
  }
  std::set<int64_t> seg_rows;
  for (const auto& nr : nl.rows) seg_rows.insert(nr.row);
  ASSERT_TRUE(std::is_sorted(l.check_rows.begin(), l.check_rows.end()));
  ASSERT_EQ(std::adjacent_find(l.check_rows.begin(), l.check_rows.end()), l.check_rows.end());
  for (int64_t r : l.check_rows) ASSERT_TRUE(seg_rows.count(r)) << "checked row " << r << " is not a segment row";
  if (l.c.rows == 0 || l.c.rows >= int64_t(seg_rows.size())) {
    ASSERT_EQ(l.check_rows.size(), seg_rows.size());
  } else {
    const std::set<int64_t> chk(l.check_rows.begin(), l.check_rows.end());
    for (const auto& s : nl.segs) {  // boundary rows always: first/last row, first/last valid row
      if (s.rows == 0) continue;
      for (int64_t r : {s.row0, s.row0 + s.rows - 1}) ASSERT_TRUE(chk.count(r)) << "boundary row " << r;
      if (s.valid > 0) {
        ASSERT_TRUE(chk.count(s.row0 + s.valid - 1)) << "last valid row";
      }
      if (s.valid < s.rows) {
        ASSERT_TRUE(chk.count(s.row0 + s.valid)) << "first pad row";
      }
    }
    ASSERT_GE(int64_t(chk.size()), std::min<int64_t>(l.c.rows, int64_t(seg_rows.size())));
  }
}

// Counts mismatches, reporting the first few in full.
struct Mismatches {
  int n = 0;
  void add(const std::string& what) {
    if (++n <= 6) ADD_FAILURE() << what;
  }
  ~Mismatches() {
    if (n > 6) ADD_FAILURE() << n << " mismatches in total";
  }
};

void cross_check_indexer(const Case& c, const ReferenceSeams& seams = exact_seams(), const OutputTransform& after = {}) {
  const naive::NaiveLayout nl = naive::derive(c);
  const Layout l = make_layout(c);
  ASSERT_NO_FATAL_FAILURE(check_layout(l, nl));
  const Inputs in = make_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  reference_indexer(l, in, out, seams);
  if (after) after(l, in, out);
  const bool f64 = c.precision == Precision::F64;
  const size_t K = size_t(c.topk);
  ASSERT_EQ(out.topk.size(), size_t(nl.q_rows) * K);
  const std::set<int64_t> chk(l.check_rows.begin(), l.check_rows.end());
  Mismatches mm;
  for (int64_t r = 0; r < nl.q_rows; ++r) {
    const int32_t* gi = out.topk.data() + size_t(r) * K;
    const float* gs = out.scores.data() + size_t(r) * K;
    if (!chk.count(r)) {  // pad slot or unsampled row: untouched
      for (size_t e = 0; e < K; ++e)
        if (gi[e] != kSentinelIndex || !is_sentinel(gs[e])) {
          mm.add(fmt::format("row {} is not checked but was written: idx {} score {}", r, gi[e], gs[e]));
          break;
        }
      continue;
    }
    const auto& nr = nl.rows[size_t(nl.row_owner[size_t(r)])];
    const naive::TopK t = naive::indexer_row(c, nl, in, nr);
    const size_t n = std::min<size_t>(K, size_t(t.allowed));
    // -1 fill: exactly the trailing k - min(k, allowed) entries, with score -inf.
    for (size_t e = n; e < K; ++e)
      if (gi[e] != -1 || gs[e] != -std::numeric_limits<float>::infinity()) {
        mm.add(fmt::format("row {} (pos {}, valid {}, allowed {}): entry {} = {} / {}, expected -1 / -inf", r, nr.pos,
                           nr.valid, t.allowed, e, gi[e], gs[e]));
        break;
      }
    std::set<int32_t> got, want(t.idx.begin(), t.idx.begin() + long(n));
    bool row_ok = true;
    for (size_t e = 0; e < n; ++e) {
      if (gi[e] < 0 || gi[e] >= nl.kv_cap || nl.kv_owner[size_t(gi[e])] != nr.doc) {
        mm.add(fmt::format("row {} entry {} = {}: not a key of document {}", r, e, gi[e], nr.doc));
        row_ok = false;
        break;
      }
      int64_t lo, hi;
      naive::allowed(c, nl, nr.doc, nr.pos, lo, hi);
      const int64_t s = gi[e] - nl.kv_off[size_t(nr.doc)];
      if (s < lo || s >= hi) {
        mm.add(fmt::format("row {} pos {} entry {} = key {} not allowed ([{}, {}))", r, nr.pos, e, s, lo, hi));
        row_ok = false;
        break;
      }
      if (!got.insert(gi[e]).second) {
        mm.add(fmt::format("row {} entry {} = {} duplicated", r, e, gi[e]));
        row_ok = false;
        break;
      }
      const double exact = naive::indexer_score(c, in, r, gi[e]);
      const double mag = naive::indexer_magnitude(c, in, r, gi[e]);
      const double tol = f64 ? 1e-12 * mag + std::ldexp(std::fabs(exact), -24)
                             : 1e-5 * mag + std::ldexp(std::fabs(exact), -23);
      if (!(std::fabs(double(gs[e]) - exact) <= tol))
        mm.add(fmt::format("row {} key {}: score {} vs naive {} (tol {:.3g})", r, gi[e], gs[e], exact, tol));
      // Best first; near-ties are ordered by exact score, so the fp scores may rise within the rounding.
      if (e > 0 && !(gs[e] <= gs[e - 1] + tol)) mm.add(fmt::format("row {}: scores not descending at entry {}", r, e));
    }
    if (!row_ok) continue;
    if (got != want) {
      // Symmetric difference must tie with the k-th score.
      const int64_t kth_row = t.idx[n - 1];
      const double kth_mag = naive::indexer_magnitude(c, in, r, kth_row);
      std::vector<int32_t> diff;
      std::set_symmetric_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(diff));
      for (int32_t x : diff) {
        const double sx = naive::indexer_score(c, in, r, x);
        const double tol = (f64 ? 1e-12 : 1e-4) * std::max(kth_mag, naive::indexer_magnitude(c, in, r, x));
        if (!(std::fabs(sx - t.kth) <= tol))
          mm.add(fmt::format("row {} pos {}: key {} ({} in the reference) has naive score {} vs k-th {} (tol {:.3g})",
                             r, nr.pos, x, got.count(x) ? "only" : "not", sx, t.kth, tol));
      }
    }
  }
}

void cross_check_sdpa(const Case& c, const ReferenceSeams& seams = exact_seams()) {
  const naive::NaiveLayout nl = naive::derive(c);
  const Layout l = make_layout(c);
  ASSERT_NO_FATAL_FAILURE(check_layout(l, nl));
  const Inputs in = make_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  reference_sdpa(l, in, out, seams);
  const bool f64 = c.precision == Precision::F64;
  // fp32: the scores' own rounding (a few ulp of values up to 5e5 under values=extreme) on top of 1e-4.
  auto tol_of = [&](double x) { return f64 ? 1e-9 + std::ldexp(std::fabs(x), -24) : 1e-4 + std::ldexp(std::fabs(x), -20); };
  const int64_t Hq = c.hq, Dv = c.dim_v;
  ASSERT_EQ(out.o.size(), size_t(nl.q_rows * Hq * Dv));
  ASSERT_EQ(out.lse.size(), size_t(nl.q_rows * Hq));
  std::vector<char> o_written(size_t(nl.q_rows), 0), s_written(size_t(nl.q_rows), 0);
  Mismatches mm;
  for (int64_t r : l.check_rows) {
    const auto& nr = nl.rows[size_t(nl.row_owner[size_t(r)])];
    if (!nr.valid) continue;  // SDPA pad rows inside a CP chunk are not outputs: they stay sentinel
    o_written[size_t(nr.o_row)] = 1;
    s_written[size_t(nr.stats_row)] = 1;
    const naive::SdpaRow w = naive::sdpa_row(c, nl, in, nr);
    for (int64_t h = 0; h < Hq; ++h) {
      const float lse = out.lse[size_t(nr.stats_row * Hq + h)];
      const double wl = w.lse[size_t(h)];
      if (std::isinf(wl) ? double(lse) != wl : !(std::fabs(double(lse) - wl) <= tol_of(wl)))
        mm.add(fmt::format("row {} (doc {} pos {}, {} keys) head {}: LSE {} vs naive {}", r, nr.doc, nr.pos, w.allowed,
                           h, lse, wl));
      for (int64_t e = 0; e < Dv; ++e) {
        const float o = out.o[size_t((nr.o_row * Hq + h) * Dv + e)];
        const double wo = w.o[size_t(h * Dv + e)];
        const bool ok = w.allowed == 0 ? o == 0.f : std::fabs(double(o) - wo) <= tol_of(wo);
        if (!ok) {
          mm.add(fmt::format("row {} (doc {} pos {}, {} keys) head {} O[{}] (O row {}): {} vs naive {}", r, nr.doc,
                             nr.pos, w.allowed, h, e, nr.o_row, o, wo));
          break;
        }
      }
    }
  }
  for (int64_t r = 0; r < nl.q_rows; ++r) {
    if (!o_written[size_t(r)])
      for (int64_t x = 0; x < Hq * Dv; ++x)
        if (!is_sentinel(out.o[size_t(r * Hq * Dv + x)])) {
          mm.add(fmt::format("O row {} must stay sentinel (pad slot / pad row / unchecked)", r));
          break;
        }
    if (!s_written[size_t(r)])
      for (int64_t h = 0; h < Hq; ++h)
        if (!is_sentinel(out.lse[size_t(r * Hq + h)])) {
          mm.add(fmt::format("stats row {} must stay sentinel", r));
          break;
        }
  }
}

class IndexerCross : public ::testing::TestWithParam<int> {};
class SdpaCross : public ::testing::TestWithParam<int> {};

const char* kIndexerFamilies[] = {"pack", "gaps", "offsets", "qkv_lens", "ratio", "cp_zigzag",
                                  "cp_contiguous", "cp_padded", "cp_ratio", "ties", "topk_edges", "rows_sampled"};
const char* kSdpaFamilies[] = {"pack", "gaps", "offsets", "qkv_lens", "window", "gqa",
                               "cp_zigzag", "cp_contiguous", "cp_padded", "no_key_rows", "wide_heads", "rows_sampled"};

void run_family(int fam, bool indexer) {
  for (int i = 0; i < kCasesPerFamily; ++i) {
    const uint64_t gseed = kGenSeed + uint64_t(indexer ? 0 : 100000) + uint64_t(fam) * 1000 + uint64_t(i);
    const std::string line = indexer ? gen_indexer(gseed, fam) : gen_sdpa(gseed, fam);
    Case c;
    try {
      c = parse_case(line);
      (void)make_layout(c);
    } catch (const CaseError& e) {
      ADD_FAILURE() << "generator seed " << gseed << " made a case the oracle rejects: " << line << "\n  " << e.what();
      continue;
    }
    for (Precision p : {Precision::F32, Precision::F64}) {
      c.precision = p;
      SCOPED_TRACE(fmt::format("generator seed {}: {}", gseed, print_case(c)));
      if (indexer)
        cross_check_indexer(c);
      else
        cross_check_sdpa(c);
    }
  }
}

TEST_P(IndexerCross, MatchesNaiveFp64) { run_family(GetParam(), true); }
TEST_P(SdpaCross, MatchesNaiveFp64) { run_family(GetParam(), false); }

INSTANTIATE_TEST_SUITE_P(Families, IndexerCross, ::testing::Range(0, 12),
                         [](const auto& info) { return std::string(kIndexerFamilies[info.param]); });
INSTANTIATE_TEST_SUITE_P(Families, SdpaCross, ::testing::Range(0, 12),
                         [](const auto& info) { return std::string(kSdpaFamilies[info.param]); });

// The generators must keep producing every layout family they claim (checked on the same seeds).
TEST(NaiveCrossCheck, GeneratorsCoverEveryFamily) {
  for (bool indexer : {true, false}) {
    std::map<std::string, int> seen;
    for (int fam = 0; fam < 12; ++fam)
      for (int i = 0; i < kCasesPerFamily; ++i) {
        const uint64_t gseed = kGenSeed + uint64_t(indexer ? 0 : 100000) + uint64_t(fam) * 1000 + uint64_t(i);
        const Case c = parse_case(indexer ? gen_indexer(gseed, fam) : gen_sdpa(gseed, fam));
        const naive::NaiveLayout nl = naive::derive(c);
        auto hit = [&](const std::string& k, bool b) { seen[k] += b; };
        hit("multi_doc", c.q_lens.size() > 1);
        hit("empty_doc", std::count(c.q_lens.begin(), c.q_lens.end(), 0) > 0);
        hit("q_pad_slots", std::count(nl.row_owner.begin(), nl.row_owner.end(), -1) > 0);
        hit("kv_pad_slots", std::count(nl.kv_owner.begin(), nl.kv_owner.end(), -1) > 0);
        hit("explicit_offsets", !c.q_offsets.empty() || !c.kv_offsets.empty());
        hit("q_ne_kv_offsets", nl.q_off != nl.kv_off);
        hit("q_len_ne_kv_len", c.q_lens != c.kv_lens);
        hit("tail", c.tail > 0);
        hit("mask_none", c.mask == MaskKind::None);
        hit("mask_topleft", c.mask == MaskKind::TopLeft);
        hit("mask_bottomright", c.mask == MaskKind::BottomRight);
        for (int cp : {2, 3, 4, 8}) hit(fmt::format("cp{}", cp), c.cp == cp);
        hit("zigzag", c.cp > 1 && c.cp_scheme == CpScheme::Zigzag);
        hit("contiguous", c.cp > 1 && c.cp_scheme == CpScheme::Contiguous);
        hit("rank_last", c.cp > 1 && c.rank == c.cp - 1);
        hit("crop", c.crop);
        bool part = false, whole = false, no_key = false, short_row = false, long_row = false;
        for (const auto& sg : nl.segs) {
          part |= sg.valid > 0 && sg.valid < sg.rows;
          whole |= c.cp > 1 && sg.rows > 0 && sg.valid == 0;
        }
        for (const auto& r : nl.rows) {
          if (!r.valid) continue;
          int64_t lo, hi;
          naive::allowed(c, nl, r.doc, r.pos, lo, hi);
          no_key |= hi == lo;
          if (indexer) {
            short_row |= hi - lo > 0 && hi - lo < c.topk;
            long_row |= hi - lo > c.topk;
          }
        }
        hit("chunk_partly_padding", part);
        hit("chunk_wholly_padding", whole);
        hit("row_without_keys", no_key);
        for (DType d : {DType::F32, DType::BF16, DType::F16}) hit(to_string(d), c.dtype == d);
        hit("rows_sampled", c.rows > 0);
        for (Poison p : {Poison::NaN, Poison::Inf, Poison::Large, Poison::None})
          hit(fmt::format("poison{}", int(p)), c.poison == p);
        if (indexer) {
          hit("ratio", c.ratio > 1);
          hit("ratio_cp", c.ratio > 1 && c.cp > 1);
          hit("levels", c.levels > 0);
          hit("topk_above_allowed", short_row);
          hit("topk_below_allowed", long_row);
          hit("doc_past_key_tile", *std::max_element(c.kv_lens.begin(), c.kv_lens.end()) > 512);
        } else {
          hit("window", c.window > 0);
          hit("window_cp", c.window > 0 && c.cp > 1);
          hit("gqa", c.hq > c.hkv);
          hit("mqa", c.hq > 1 && c.hkv == 1);
          hit("dim_v", c.dim_v != c.dim);
          hit("o_offsets", !c.o_offsets.empty());
          hit("stats_offsets", !c.stats_offsets.empty());
        }
      }
    std::string summary;
    for (const auto& [k, n] : seen) {
      EXPECT_GE(n, 3) << (indexer ? "indexer" : "sdpa") << " family feature " << k;
      summary += fmt::format(" {}={}", k, n);
    }
    std::cout << (indexer ? "indexer" : "sdpa") << " layouts by feature:" << summary << "\n";
  }
}

// The cross-check must be able to fail: each seam a bug model overrides, on the production path, is caught.
int failures_of(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter rep(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  return results.size();
}

TEST(NaiveCrossCheck, CatchesEverySeamOverride) {
  // Case lines per model (the seams: a row's keys, its Q and output rows, its KV head, the stored LSE, the
  // P @ V key tile; fill-zero's stored fill, a transform).
  struct Bad { const char* line; const char* model; };
  const std::vector<Bad> bad = {
      {"op=indexer docs=64,32 cp=2 rank=1 heads=2 dim=8 topk=8", "topleft-cp"},
      {"op=indexer docs=30,20 pad=3,1 heads=2 dim=8 topk=8 poison=none", "derived-offsets"},
      {"op=indexer docs=30,20 q_pad=2 kv_pad=5 heads=2 dim=8 topk=8 poison=none", "shared-qkv-offsets"},
      {"op=indexer docs=30,20 heads=2 dim=8 topk=40", "off-by-one-causal"},
      {"op=indexer docs=30,20 heads=2 dim=8 topk=8", "cross-doc"},
      {"op=indexer docs=30,20 heads=2 dim=8 topk=40", "fill-zero"},
      {"op=sdpa docs=30,20 pad=3,1 hq=2 hkv=1 dim=8 poison=none", "derived-offsets"},
      {"op=sdpa docs=30,20 hq=2 hkv=1 dim=8 poison=nan tail=64", "tail-read"},
      {"op=sdpa docs=30,20 hq=2 hkv=1 dim=8", "off-by-one-causal"},
      {"op=sdpa docs=30,20 hq=4 hkv=2 dim=8", "gqa-modulo"},
      {"op=sdpa docs=30,20 hq=2 hkv=1 dim=8", "lse-log2"},
      {"op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=2 dim=8", "stats-packed"},
      {"op=sdpa docs=64,32 cp=2 rank=0 hq=2 dim=8", "topleft-cp"},
  };
  auto model = [](const std::string& name) -> const BugModel& {
    for (const auto& m : bug_models())
      if (m.name == name) return m;
    throw std::runtime_error("no bug model " + name);
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(std::string(b.model) + ": " + b.line);
    const Case c = parse_case(b.line);
    const BugModel& m = model(b.model);
    const ReferenceSeams& s = m.seams ? *m.seams : exact_seams();
    ASSERT_TRUE(c.op == Op::Indexer || !m.transform) << "cross_check_sdpa runs no transform";
    EXPECT_EQ(failures_of([&] { c.op == Op::Indexer ? cross_check_indexer(c) : cross_check_sdpa(c); }), 0);
    EXPECT_GT(failures_of([&] { c.op == Op::Indexer ? cross_check_indexer(c, s, m.transform) : cross_check_sdpa(c, s); }), 0);
  }
}

}  // namespace

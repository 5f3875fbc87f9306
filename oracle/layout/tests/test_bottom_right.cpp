// Bottom-right alignment (layout.h): one position rule with and without CP, and query tokens keyed by
// their index among the document's q tokens, not by their (possibly shifted) mask position.
//  * q_len > kv_len under bottom-right puts the first rows at negative positions: they are still real
//    tokens and must hold data, not the pad-slot poison;
//  * the shift must not make two documents' rows share a token id (identical values);
//  * an indexer case run on every rank of cp=N gives, row for row (matched by document position), the
//    cp=1 result: ratio 1/2/4, crop 0/1, bottom-right and top-left, padded CP, both CP schemes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/reference/reference.h"
#include "attn_oracle/inputs/tensors.h"

using namespace ao;

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  return s;
}

const std::vector<float>& q_of(const Inputs& in) { return in.q; }

// Valid Q rows of the layout with their document.
std::vector<std::pair<int64_t, int>> valid_rows(const Layout& l) {
  std::vector<std::pair<int64_t, int>> out;
  for (int64_t r = 0; r < l.q_rows; ++r)
    if (l.valid_row(r)) out.push_back({r, l.seg_of(r).doc});
  return out;
}

// Cases with q_len > kv_len under bottom-right: the two, then random ones (seeds recorded).
std::vector<std::string> q_longer_cases() {
  std::vector<std::string> out = {
      "op=sdpa q_lens=5,3 kv_lens=2,4 mask=bottomright hq=1 dim=2 dtype=fp32 poison=nan",
      "op=sdpa q_lens=2,3 kv_lens=10,9 mask=bottomright hq=1 hkv=1 dim=4 dtype=fp32",
  };
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 40; ++i) {
    const int B = 1 + int(rng() % 4);
    std::vector<int64_t> q, kv;
    for (int b = 0; b < B; ++b) {
      q.push_back(1 + int64_t(rng() % 40));
      kv.push_back(1 + int64_t(rng() % 40));
    }
    const uint64_t seed = rng() % 100000;
    if (i % 2)
      out.push_back(fmt::format("op=sdpa q_lens={} kv_lens={} mask=bottomright hq=2 hkv=1 dim=4 dtype=fp32 seed={}",
                                list(q), list(kv), seed));
    else
      out.push_back(fmt::format("op=indexer q_lens={} kv_lens={} ratio={} heads=2 dim=4 topk=4 dtype=fp32 seed={}",
                                list(q), list(kv), 1 + int(rng() % 3), seed));
  }
  return out;
}

TEST(BottomRight, ValidRowsHoldDataWhenQueriesOutnumberKeys) {
  for (const auto& line : q_longer_cases()) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_inputs(l);
    const int64_t w = int64_t(q_of(in).size()) / l.q_rows;
    int64_t poisoned = 0;
    for (auto [r, doc] : valid_rows(l))
      for (int64_t e = 0; e < w; ++e) poisoned += !(std::fabs(in.q[size_t(r * w + e)]) <= 1.f);
    EXPECT_EQ(poisoned, 0) << "valid Q elements holding poison";
    if (!in.w.empty()) {
      int64_t bad_w = 0;
      for (auto [r, doc] : valid_rows(l))
        for (int e = 0; e < l.c.heads; ++e) bad_w += !(std::fabs(in.w[size_t(r * l.c.heads + e)]) <= 1.f);
      EXPECT_EQ(bad_w, 0) << "valid W elements holding poison";
    }
  }
}

TEST(BottomRight, NoTwoDocumentsShareQueryValues) {
  for (const auto& line : q_longer_cases()) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Inputs in = make_inputs(l);
    const int64_t w = int64_t(in.q.size()) / l.q_rows;
    std::map<std::vector<uint32_t>, std::pair<int64_t, int>> seen;  // row bits -> (row, doc)
    int64_t shared = 0;
    for (auto [r, doc] : valid_rows(l)) {
      std::vector<uint32_t> bits(static_cast<size_t>(w));
      std::memcpy(bits.data(), in.q.data() + r * w, size_t(w) * 4);
      auto [it, fresh] = seen.insert({bits, {r, doc}});
      if (!fresh && it->second.second != doc) {
        ++shared;
        ADD_FAILURE() << "Q row " << r << " (doc " << doc << ") has the values of row " << it->second.first
                      << " (doc " << it->second.second << ")";
      }
    }
    EXPECT_EQ(shared, 0);
  }
}

// Indexer, row by row: the union over the ranks of cp=N equals cp=1 (rows matched by document
// position; K/V rows are the same global buffer in both, so indices compare directly).
struct CpCase {
  std::string cp1, cpn;
  int cp;
};

CpCase random_cp_case(std::mt19937_64& rng, int i) {
  const int ratio = std::array{1, 2, 4}[size_t(i % 3)];
  const int cp = 2 + int(rng() % 3);
  const bool zigzag = rng() % 4 != 0;
  const int64_t parts = zigzag ? 2 * cp : cp;
  const int B = 1 + int(rng() % 3);
  std::vector<int64_t> q, kv, pad;
  for (int b = 0; b < B; ++b) {
    const int64_t L = 1 + int64_t(rng() % 48);
    q.push_back(L);
    // Compressed keys: about L/ratio of them (q_lens == kv_lens * ratio style), or any count.
    kv.push_back(ratio == 1 ? L : rng() % 2 ? std::max<int64_t>(1, L / ratio) : 1 + int64_t(rng() % 30));
    const int64_t P = (L + parts - 1) / parts * parts + parts * int64_t(rng() % 2);  // padded CP
    pad.push_back(P - L);
  }
  const bool crop = (i / 3) % 2;
  const char* mask = (i / 6) % 3 == 2 ? "topleft" : "bottomright";
  const std::string base =
      fmt::format("op=indexer q_lens={} kv_lens={} q_pad={} kv_pad={} ratio={} mask={} heads=2 dim=8 topk={} "
                  "dtype={} precision=fp64 seed={}",
                  list(q), list(kv), list(pad), 1 + rng() % 3, ratio, mask, 1 + rng() % 9,
                  rng() % 2 ? "fp32" : "bf16", rng() % 100000);
  return {base, fmt::format("{} cp={} cp_scheme={}{}", base, cp, zigzag ? "zigzag" : "contiguous",
                            crop ? " crop=1" : ""),
          cp};
}

Outputs run_ref(const Layout& l) {
  const Inputs in = make_inputs(l);
  Outputs out = make_sentinel_outputs(l);
  reference_indexer(l, in, out);
  return out;
}

void check_cp_union(const CpCase& cc) {
  SCOPED_TRACE(cc.cpn);
  const Layout l1 = make_layout(parse_case(cc.cp1));
  const Outputs o1 = run_ref(l1);
  const size_t K = size_t(l1.c.topk);
  // cp=1 row of (document, position).
  std::map<std::pair<int, int64_t>, int64_t> row_at;
  for (int64_t r = 0; r < l1.q_rows; ++r)
    if (l1.valid_row(r)) row_at[{l1.seg_of(r).doc, l1.pos_of(r)}] = r;
  std::map<int64_t, int> held;  // cp=1 row -> times held by a rank
  int64_t bad = 0;
  for (int rank = 0; rank < cc.cp; ++rank) {
    const Layout ln = make_layout(parse_case(fmt::format("{} rank={}", cc.cpn, rank)));
    const Outputs on = run_ref(ln);
    for (const auto& s : ln.segments)
      for (int64_t i = 0; i < s.rows; ++i) {
        const int64_t r = s.row0 + i;
        const int32_t* got = on.topk.data() + size_t(r) * K;
        if (i >= s.valid) {  // a pad row of a chunk: all -1
          for (size_t e = 0; e < K; ++e) bad += got[e] != -1;
          continue;
        }
        auto it = row_at.find({s.doc, s.pos0 + i});
        if (it == row_at.end()) {
          if (++bad < 5) ADD_FAILURE() << "rank " << rank << " row " << r << ": doc " << s.doc << " position "
                                       << s.pos0 + i << " is no valid cp=1 row";
          continue;
        }
        ++held[it->second];
        const int32_t* want = o1.topk.data() + size_t(it->second) * K;
        if (!std::equal(got, got + K, want) && ++bad < 5)
          ADD_FAILURE() << "rank " << rank << " row " << r << " (doc " << s.doc << " position " << s.pos0 + i
                        << ") differs from cp=1 row " << it->second;
      }
  }
  for (const auto& [key, r] : row_at)
    if (held[r] != 1 && ++bad < 5) ADD_FAILURE() << "cp=1 row " << r << " held by " << held[r] << " ranks";
  EXPECT_EQ(bad, 0);
}

TEST(BottomRight, IndexerCpRanksUnionEqualsNoCp) {
  // The case: every row differed between cp=1 and cp=2's two ranks.
  check_cp_union({"op=indexer docs=16 ratio=2", "op=indexer docs=16 ratio=2 cp=2", 2});
  std::mt19937_64 rng(0xb077011);
  for (int i = 0; i < 72; ++i) check_cp_union(random_cp_case(rng, i));
}

}  // namespace

// The indexer backward's exact reference (indexer_backward.h):
//  * against a naive fp64 transcription of the definition (dense loops, its own -1 handling and
//    accumulation) on random layouts from recorded seeds: every element within the fp32 rounding of the
//    output plus 1e-12 of its terms' magnitude (both sides are fp64 in different orders);
//  * the CP partial: per CP rank the rows are the cp=1 rows of the same tokens (d_index_q, d_weights
//    bitwise), and the ranks' d_index_k summed over the ranks is cp=1's (zigzag and contiguous, packs);
//  * the generated inputs: per token, the same top-k keys, target and prediction bits under any layout;
//    targets that stress the clip (zeros, masses below e^-100) and predictions that underflow to 0;
//  * bitwise the same for any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "attn_oracle/reference/indexer_backward.h"
#include "attn_oracle/reference/reference.h"
#include "../reference_runtime.h"
#include "naive_reference.h"

using namespace ao;

namespace {

struct BwdRun {
  Layout l;
  Inputs in;
  Outputs out;
};

BwdRun run_case(const std::string& line) {
  BwdRun x{make_layout(parse_case(line)), {}, {}};
  x.in = make_case_inputs(x.l);
  x.out = make_sentinel_outputs(x.l);
  reference_indexer_backward(x.l, x.in, x.out);
  return x;
}

// The naive transcription (oracle/tests/support/naive_reference.h): per valid row, per valid slot,
// straight from the definition, over the naive layout derived from the case alone.
using Naive = naive::IndexerGrads;
Naive naive_answer(const Layout& l, const Inputs& in) { return naive::indexer_bwd(l.c, naive::derive(l.c), in); }

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag,
                  const std::vector<char>& rows, size_t width, const std::string& what) {
  int bad = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r]) continue;
    for (size_t e = 0; e < width && bad < 5; ++e) {
      const size_t i = r * width + e;
      const double tol = std::ldexp(std::fabs(want[i]), -23) + 1e-12 * mag[i] + 1e-300;
      if (!(std::fabs(double(got[i]) - want[i]) <= tol)) {
        ++bad;
        ADD_FAILURE() << what << " row " << r << " elem " << e << ": " << got[i] << " vs naive " << want[i];
      }
    }
  }
}

std::string random_line(std::mt19937_64& rng, int i) {
  auto uni = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  const char* means[] = {"rows", "valid", "keyed", "sum"};
  std::string docs = uni(0, 1) ? fmt::format("{}", uni(1, 90)) : fmt::format("{},{}", uni(1, 60), uni(1, 60));
  std::string line = fmt::format("op=indexer pass=bwd docs={} heads={} dim={} topk={} loss_mean={} seed={}", docs, uni(1, 4),
                                 uni(1, 9), uni(1, 24), means[uni(0, 3)], 1000 + i);
  if (uni(0, 2) == 0) line += " levels=2";  // integer inputs: exact zeros of q . k
  if (uni(0, 2) == 0) line += " scale=0.375";
  if (uni(0, 3) == 0) line += " pad=3";
  if (uni(0, 3) == 0) line += " mask=bottomright";
  if (uni(0, 3) == 0) line += " ratio=2";
  return line;
}

}  // namespace

TEST(IndexerBackward, MatchesNaiveDefinitionOnRandomLayouts) {
  std::mt19937_64 rng(0x1dbb2026);
  for (int i = 0; i < 40; ++i) {
    const std::string line = random_line(rng, i);
    SCOPED_TRACE(line);
    const BwdRun x = run_case(line);
    const Naive n = naive_answer(x.l, x.in);
    std::vector<char> qrows(size_t(x.l.q_rows), 0);
    for (int64_t r = 0; r < x.l.q_rows; ++r) qrows[size_t(r)] = x.l.row_segment[size_t(r)] >= 0 && x.l.valid_row(r);
    const size_t H = size_t(x.l.c.heads), D = size_t(x.l.c.dim);
    expect_close(x.out.dq, n.dq, n.dq_mag, qrows, H * D, "dq");
    expect_close(x.out.dw, n.dw, n.dw_mag, qrows, H, "dw");
    expect_close(x.out.dk, n.dk, n.dk_mag, valid_rows(x.l, RowBuffer::KV), D, "dk");
    ASSERT_EQ(x.out.loss.size(), 1u);
    EXPECT_NEAR(double(x.out.loss[0]), n.loss, std::ldexp(std::fabs(n.loss), -23) + 1e-12) << "loss";
  }
}

// What a CP rank holds: its rows' d_index_q and d_weights are the cp=1 rows of the same tokens, bitwise;
// d_index_k summed over the ranks is cp=1's, within the ranks' fp32 rounding.
TEST(IndexerBackward, CpRanksSumToTheSingleRankAnswer) {
  for (const char* scheme : {"zigzag", "contiguous"})
    for (uint64_t seed : {11u, 29u, 4242u})
      for (const char* docs : {"64", "48,32"}) {
        const std::string base =
            fmt::format("op=indexer pass=bwd docs={} heads=3 dim=8 topk=12 loss_mean=sum seed={}", docs, seed);
        SCOPED_TRACE(base + " cp_scheme=" + scheme);
        const BwdRun one = run_case(base);
        const int H = one.l.c.heads, D = one.l.c.dim;
        std::map<int64_t, int64_t> one_row;  // q token -> row
        for (int64_t r = 0; r < one.l.q_rows; ++r)
          if (const int64_t t = q_token_id(one.l, r); t >= 0) one_row[t] = r;
        std::vector<double> dk_sum(one.out.dk.size(), 0), dk_abs(one.out.dk.size(), 0);
        double loss_sum = 0, loss_abs = 0;
        for (int rank = 0; rank < 4; ++rank) {
          const BwdRun x = run_case(fmt::format("{} cp=4 rank={} cp_scheme={}", base, rank, scheme));
          ASSERT_EQ(x.l.kv_rows, one.l.kv_rows);  // the all-gathered K buffer is cp=1's
          for (int64_t r = 0; r < x.l.q_rows; ++r) {
            const int64_t t = q_token_id(x.l, r);
            if (t < 0) continue;
            const int64_t r1 = one_row.at(t);
            for (int e = 0; e < H * D; ++e)
              ASSERT_EQ(f32_bits(x.out.dq[size_t(r * H * D + e)]), f32_bits(one.out.dq[size_t(r1 * H * D + e)]));
            for (int h = 0; h < H; ++h)
              ASSERT_EQ(f32_bits(x.out.dw[size_t(r * H + h)]), f32_bits(one.out.dw[size_t(r1 * H + h)]));
          }
          for (size_t e = 0; e < dk_sum.size(); ++e)
            if (!is_sentinel(x.out.dk[e])) dk_sum[e] += x.out.dk[e], dk_abs[e] += std::fabs(x.out.dk[e]);
          loss_sum += x.out.loss[0], loss_abs += std::fabs(x.out.loss[0]);
        }
        const auto kv = valid_rows(one.l, RowBuffer::KV);
        for (size_t j = 0; j < kv.size(); ++j)
          for (int d = 0; kv[j] && d < D; ++d) {
            const size_t e = j * size_t(D) + size_t(d);
            EXPECT_NEAR(dk_sum[e], double(one.out.dk[e]),
                        std::ldexp(dk_abs[e], -23) + std::ldexp(std::fabs(one.out.dk[e]), -23))
                << "key row " << j << " d " << d;
          }
        EXPECT_NEAR(loss_sum, one.out.loss[0], std::ldexp(loss_abs + std::fabs(one.out.loss[0]), -22));
      }
}

// Per token the same slots, target and prediction under any layout (CP split, padding), and the values
// stress what the definition clips.
TEST(IndexerBackward, GeneratedInputsFollowTokensAndStressTheClip) {
  const BwdRun one = run_case("op=indexer pass=bwd docs=96,40 heads=2 dim=8 topk=16 scale=200 seed=5");
  const BwdRun cp = run_case("op=indexer pass=bwd docs=96,40 heads=2 dim=8 topk=16 scale=200 seed=5 cp=2 rank=1 q_pad=8,8 kv_pad=4,4");
  const int K = one.l.c.topk;
  std::map<int64_t, int64_t> one_row;
  for (int64_t r = 0; r < one.l.q_rows; ++r)
    if (const int64_t t = q_token_id(one.l, r); t >= 0) one_row[t] = r;
  int64_t compared = 0;
  for (int64_t r = 0; r < cp.l.q_rows; ++r) {
    const int64_t t = q_token_id(cp.l, r);
    if (t < 0) {
      for (int e = 0; e < K; ++e) ASSERT_EQ(cp.in.topk[size_t(r * K + e)], -1);
      continue;
    }
    const int64_t r1 = one_row.at(t);
    const int seg = cp.l.row_segment[size_t(r)], seg1 = one.l.row_segment[size_t(r1)];
    const int64_t off = cp.l.docs[size_t(cp.l.segments[size_t(seg)].doc)].kv_off,
                  off1 = one.l.docs[size_t(one.l.segments[size_t(seg1)].doc)].kv_off;
    for (int e = 0; e < K; ++e) {
      const int32_t v = cp.in.topk[size_t(r * K + e)], v1 = one.in.topk[size_t(r1 * K + e)];
      ASSERT_EQ(v < 0, v1 < 0);
      if (v < 0) continue;
      ASSERT_EQ(v - off, v1 - off1);
      ASSERT_EQ(f32_bits(cp.in.target[size_t(r * K + e)]), f32_bits(one.in.target[size_t(r1 * K + e)]));
      ASSERT_EQ(f32_bits(cp.in.predict[size_t(r * K + e)]), f32_bits(one.in.predict[size_t(r1 * K + e)]));
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
  // Over the cp=1 rows (scale=200: logits far apart): zero targets, targets below e^-100, near-one-hot rows,
  // predictions that underflow to 0, and -1
  // slots holding the poison.
  int64_t zero_t = 0, tiny_t = 0, one_hot = 0, zero_p = 0, poison = 0;
  for (int64_t r = 0; r < one.l.q_rows; ++r) {
    if (q_token_id(one.l, r) < 0) continue;
    for (int e = 0; e < K; ++e) {
      const float t = one.in.target[size_t(r * K + e)], p = one.in.predict[size_t(r * K + e)];
      if (one.in.topk[size_t(r * K + e)] < 0) { poison += std::isnan(t) && std::isnan(p); continue; }
      zero_t += t == 0, tiny_t += t > 0 && std::log(double(t)) < -100, one_hot += t > 0.99f, zero_p += p == 0;
    }
  }
  EXPECT_GT(zero_t, 0);
  EXPECT_GT(tiny_t, 0);
  EXPECT_GT(one_hot, 0);
  EXPECT_GT(zero_p, 0);
  EXPECT_GT(poison, 0);
  ASSERT_EQ(one.in.grad_loss.size(), 1u);
}

TEST(IndexerBackward, BitwiseTheSameForAnyThreadCount) {
  const std::string line = "op=indexer pass=bwd docs=300,200 heads=4 dim=16 topk=32 seed=9";
  auto& n = detail::reference_threads_override();
  n = 1;
  const BwdRun a = run_case(line);
  n = 3;
  const BwdRun b = run_case(line);
  n = 0;
  EXPECT_EQ(a.in.topk, b.in.topk);
  for (auto f : {&Outputs::dq, &Outputs::dw, &Outputs::dk, &Outputs::loss}) {
    ASSERT_EQ((a.out.*f).size(), (b.out.*f).size());
    for (size_t i = 0; i < (a.out.*f).size(); ++i) ASSERT_EQ(f32_bits((a.out.*f)[i]), f32_bits((b.out.*f)[i]));
  }
}

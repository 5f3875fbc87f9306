// Bug models whose wrong addressing points outside a buffer re-create the kernel's wrong answer, never
// its memory error: keys addressed past the K/V buffer are dropped (the row sees what the buffer holds),
// stores that would land outside O are dropped, and nothing is sized by a max_seqlen beyond the layout.
// (The ASan/UBSan run of every model is the model_sanitizer CTest; these pin the defined answers.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;

namespace {

struct Runs {
  Trial t;
  TrialRun got, ref;
};

Runs run_model(const std::string& line, const std::string& model) {
  Runs r{Trial(parse_case(line)), {}, {}};
  auto be = make_backend("cpu-bug:" + model);
  auto ref = make_backend("cpu-ref");
  r.got = r.t.run(*be);
  r.ref = r.t.run(*ref);
  return r;
}

}  // namespace

// docs=5,3: document 1's keys are addressed at 1 * max_seqlen_kv, past the 8-row K/V buffer for every
// max_seqlen_kv >= 8 (9: one row past its end; 2^40: a stride no buffer holds). Its rows see no key
// (O = 0, LSE = -inf); document 0 (base 0 either way) equals cpu-ref bitwise.
TEST(ModelBounds, BatchStridePastTheBufferDropsTheKeys) {
  for (const char* mk : {"9", "16", "100000", "1099511627776"}) {
    const std::string line = std::string("op=sdpa docs=5,3 hq=1 dim=8 max_seqlen_kv=") + mk;
    SCOPED_TRACE(line);
    Runs r = run_model(line, "batch-stride-max-seqlen");
    ASSERT_TRUE(r.got.ok()) << r.got.status.reason;
    ASSERT_TRUE(r.ref.ok());
    const Layout& l = r.t.layout();
    ASSERT_EQ(l.kv_rows, 8);
    const size_t W = size_t(l.c.hq) * size_t(l.c.dim_v);
    int doc1_rows = 0;
    for (const auto& s : l.segments)
      for (int64_t i = 0; i < s.valid; ++i) {
        const int64_t orow = s.o_row0 + i, srow = s.stats_row0 + i;
        for (size_t e = 0; e < W; ++e) {
          const float x = r.got.out.o[size_t(orow) * W + e];
          if (s.doc == 1)
            EXPECT_EQ(x, 0.f) << "row " << orow;
          else
            EXPECT_EQ(f32_bits(x), f32_bits(r.ref.out.o[size_t(orow) * W + e])) << "row " << orow;
        }
        const float lse = r.got.out.lse[size_t(srow)];
        if (s.doc == 1) {
          EXPECT_EQ(lse, -std::numeric_limits<float>::infinity()) << "row " << srow;
          ++doc1_rows;
        } else {
          EXPECT_EQ(f32_bits(lse), f32_bits(r.ref.out.lse[size_t(srow)])) << "row " << srow;
        }
      }
    EXPECT_EQ(doc1_rows, 3);
  }
}

// Under CP with padded offsets the combine's "document 0" is this rank's first local document: its rows
// each hold some row cpu-ref computed (its own, or a later document's that overwrote it); the other
// documents' rows stay unwritten except where a longer document's store reached them (also a row cpu-ref
// computed); the stats are untouched.
TEST(ModelBounds, SplitCombineStride0StaysInsideTheLocalBuffer) {
  for (const char* line :
       {"op=sdpa docs=3,63,260,106,5 padded_offsets=0,32,96,448,576,608 cp=16 rank=2 window=1 max_seqlen_kv=324 "
        "num_splits=8 hq=2 hkv=1 dtype=fp16 seed=792779 poison=large",
        "op=sdpa docs=3,63,20,6 padded_offsets=0,32,96,128,160 cp=4 rank=3 num_splits=2 hq=2 hkv=1 dim=8 seed=5"}) {
    SCOPED_TRACE(line);
    Runs r = run_model(line, "split-combine-stride0");
    ASSERT_TRUE(r.got.ok()) << r.got.status.reason;
    ASSERT_TRUE(r.ref.ok());
    const Layout& l = r.t.layout();
    const size_t W = size_t(l.c.hq) * size_t(l.c.dim_v);
    int first = -1;
    int64_t first_row = std::numeric_limits<int64_t>::max();
    for (const auto& s : l.segments)
      if (s.rows > 0 && s.o_row0 < first_row) first_row = s.o_row0, first = s.doc;
    ASSERT_GE(first, 0);
    auto row_of = [&](const Outputs& o, int64_t row) {
      std::vector<uint32_t> b(W);
      for (size_t e = 0; e < W; ++e) b[e] = f32_bits(o.o[size_t(row) * W + e]);
      return b;
    };
    int moved = 0;  // valid rows that no longer hold their own answer
    for (const auto& s : l.segments)
      for (int64_t i = 0; i < s.valid; ++i) {
        const int64_t orow = s.o_row0 + i;
        const auto got = row_of(r.got.out, orow);
        moved += got != row_of(r.ref.out, orow);
        bool some_ref_row = false;
        for (int64_t q = 0; q < l.o_rows && !some_ref_row; ++q) some_ref_row = got == row_of(r.ref.out, q);
        if (some_ref_row) continue;
        EXPECT_NE(s.doc, first) << "row " << orow;  // the first document's rows are all written
        for (uint32_t b : got) EXPECT_EQ(b, kSentinelBits) << "row " << orow;
      }
    EXPECT_GT(moved, 0);
    for (size_t i = 0; i < r.got.out.lse.size(); ++i)
      EXPECT_EQ(f32_bits(r.got.out.lse[i]), f32_bits(r.ref.out.lse[i])) << i;
  }
}

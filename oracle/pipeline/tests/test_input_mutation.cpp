// A backend (or `--vs` reference) that writes its const inputs must end as ERROR naming the tensor,
// never PASS: were the reference run after the backend on the same buffers, a kernel that zeroed q and w
// and returned the lowest allowed indices would pass.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <fmt/format.h>

#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/inputs/input_fingerprint.h"

using namespace ao;

namespace {

void flip_low_bit(float& x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  b ^= 1u;
  std::memcpy(&x, &b, sizeof b);
}

// Zeroes q and w through const_cast (every score becomes 0: all keys tie) and returns, per checked
// row, the lowest min(k, allowed) allowed keys then -1; SDPA: flips a bit of k and returns zeros.
class InputWriter : public Backend {
 public:
  explicit InputWriter(bool write) : write_(write) {}
  std::string name() const override { return write_ ? "test:writes-inputs" : "test:lowest-indices"; }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    auto& m = const_cast<Inputs&>(in);
    if (l.c.op == Op::Indexer) {
      if (write_) {
        std::fill(m.q.begin(), m.q.end(), 0.f);
        std::fill(m.w.begin(), m.w.end(), 0.f);
      }
      const size_t K = size_t(l.c.topk);
      for (int64_t r : l.check_rows) {
        int64_t lo = 0, hi = 0;
        if (l.valid_row(r)) l.allowed_range(l.seg_of(r).doc, l.pos_of(r), lo, hi);
        const int64_t off = l.docs[size_t(l.seg_of(r).doc)].kv_off;
        for (size_t e = 0; e < K; ++e)
          out.topk[size_t(r) * K + e] = int64_t(e) < hi - lo ? int32_t(off + lo + int64_t(e)) : -1;
      }
    } else {
      if (write_) flip_low_bit(m.k[m.k.size() / 2]);
      std::fill(out.o.begin(), out.o.end(), 0.f);
      std::fill(out.lse.begin(), out.lse.end(), 0.f);
    }
    return {};
  }

 private:
  bool write_;
};

}  // namespace

TEST(InputMutation, BackendThatZeroesQAndWIsAnErrorNotAPass) {
  auto ref = make_backend("cpu-ref");
  InputWriter honest(false), writer(true);
  for (int seed : {1, 7, 42, 1234}) {
    const Case c = parse_case("op=indexer docs=512,256 cp=4 rank=2 seed=" + std::to_string(seed));
    // The lowest indices alone are wrong on this case (so the zeroing was what made it pass)...
    EXPECT_EQ(run_case(c, honest, *ref).verdict.kind, Verdict::Fail) << seed;
    // ...and writing the inputs is reported, naming the tensor and its first changed element.
    const CaseResult r = run_case(c, writer, *ref);
    EXPECT_EQ(r.verdict.kind, Verdict::Error) << seed << ": " << r.verdict.reason;
    EXPECT_NE(r.verdict.reason.find("backend test:writes-inputs wrote its input q (first changed element"),
              std::string::npos)
        << r.verdict.reason;
    EXPECT_EQ(r.ref_seconds, 0) << "the reference must not run on written inputs";
  }
}

TEST(InputMutation, ReferenceThatWritesItsInputsIsAnError) {
  auto be = make_backend("cpu-ref");
  InputWriter writer(true);
  const CaseResult r = run_case(parse_case("op=sdpa docs=40,17 hq=4 hkv=2 seed=5"), *be, writer);
  EXPECT_EQ(r.verdict.kind, Verdict::Error) << r.verdict.reason;
  EXPECT_NE(r.verdict.reason.find("reference test:writes-inputs wrote its input k"), std::string::npos)
      << r.verdict.reason;
}

// Every case of corpus/edge: a backend that writes its inputs never passes (before: 48/48 passed).
TEST(InputMutation, NoEdgeCorpusCasePassesWithWrittenInputs) {
  auto ref = make_backend("cpu-ref");
  InputWriter writer(true);
  const auto entries = read_case_files(collect_case_files({std::string(AO_SOURCE_DIR) + "/corpus/edge"}));
  ASSERT_GT(entries.size(), 20u);
  for (const auto& e : entries) {
    const CaseResult r = run_case(e.c, writer, *ref);
    EXPECT_EQ(r.verdict.kind, Verdict::Error) << e.file << ":" << e.line << ": " << r.verdict.reason;
  }
}

TEST(InputMutation, FingerprintNamesTheFirstChangedElement) {
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 8; ++i) {
    const Case c = parse_case(fmt::format("op=sdpa docs={},{} hq=4 hkv=2 seed={}", 1 + rng() % 300, 1 + rng() % 300,
                                          rng() % 100000));
    const Layout l = make_layout(c);
    Inputs in = make_inputs(l);
    const InputFingerprint before = fingerprint(in);
    EXPECT_EQ(changed_input(l, in, before), "");
    const size_t at = rng() % in.v.size();
    flip_low_bit(in.v[at]);
    EXPECT_NE(changed_input(l, in, before).find(fmt::format("v (first changed element {} of", at)), std::string::npos)
        << changed_input(l, in, before);
  }
}

// A rewrite made to keep an unkeyed fingerprint: the hash's structure is in the source (per 64-bit word
// w of a lane, h = f(h ^ w) with f a bijection), so a backend can change one word and pick the lane's next
// word to bring the state back. With the key drawn per process it cannot: the check sees the change.
TEST(InputMutation, ARewriteKeepingTheUnkeyedFingerprintIsCaught) {
  constexpr uint64_t kMul = 0x9fb21c651e98df25ull, kSeed = 0x9e3779b97f4a7c15ull;  // block 0, lane 0
  const auto step = [](uint64_t x) {
    x *= kMul;
    return x ^ (x >> 32);
  };
  const Layout l = make_layout(parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128 seed=5"));
  Inputs in = make_inputs(l);
  const InputFingerprint before = fingerprint(in);
  uint64_t w1, w2;  // lane 0's first two words: floats 0-1 and 8-9 of q
  std::memcpy(&w1, &in.q[0], 8);
  std::memcpy(&w2, &in.q[8], 8);
  const uint64_t w1_forged = w1 ^ 0x40000000ull;  // q[0] changed
  const uint64_t w2_forged = step(kSeed ^ w1) ^ w2 ^ step(kSeed ^ w1_forged);
  std::memcpy(&in.q[0], &w1_forged, 8);
  std::memcpy(&in.q[8], &w2_forged, 8);
  EXPECT_NE(changed_input(l, in, before).find("q (first changed element 0 of"), std::string::npos)
      << "a rewrite that keeps the unkeyed hash went unnoticed";
}

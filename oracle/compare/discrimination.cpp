// The discrimination check (discrimination.h).
#include "attn_oracle/compare/discrimination.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attn_oracle/compare/judged_region.h"

namespace ao {

namespace {

// An exact element below 2^-100 is zero to a kernel: it is a sum of terms below fp32's normal range
// (2^-126; up to 2^26 of them), which a kernel built with fast math flushes to zero term by term, and the
// indexer's gates allow that underflow per term. An output whose exact value lies wholly below it
// (indexer gradients of rows whose targets sit near the clip at e^-100, ~1e-40) has a right zero
// answer, as an exactly zero one has.
constexpr float kNegligible = 0x1p-100f;

// The worst err/gate over the verdict's gated metrics that carry one (-1: none does).
double worst_ratio(const Verdict& v) {
  double worst = -1;
  for (const auto& m : v.metrics)
    if (m.gated() && m.gate_ratio >= 0 && !(m.gate_ratio <= worst)) worst = m.gate_ratio;
  return worst;
}

}  // namespace

std::vector<GateCheck> check_gates(const Layout& l, const PreparedJudgement& j) {
  const JudgedRegion region(l);
  const std::vector<OutputSpec>& specs = region.outputs();
  Outputs w = j.exact();  // the answer judged: exact but for the output under test
  std::vector<GateCheck> out;
  for (size_t o = 0; o < specs.size(); ++o) {
    const OutputSpec& s = specs[o];
    GateCheck g;
    g.output = s.name;
    // The output's valid judged rows, as rows of its buffer.
    std::vector<int64_t> rows;
    if (s.rows == RowBuffer::KV) {
      rows = region.kv_value_rows();
    } else {
      for (int64_t r : region.value_rows())
        if (region.judges(o, r) && l.valid_row(r)) rows.push_back(region.buffer_row(o, r));
    }
    const size_t W = size_t(s.width);
    g.judged = int64_t(rows.size() * W);
    if (g.judged == 0) {
      out.push_back(std::move(g));
      continue;
    }
    // The float zero answer is judged whole (its worst err/gate is reported); the others until they fail.
    auto judge = [&](GateCheck& into, bool zero) {
      const Verdict v = zero && s.floats ? j.judge(w) : j.judge_until_failure(w);
      const bool fails = is_failure(v.kind);
      if (zero) {
        into.zero_fails = fails;
        into.zero_ratio = worst_ratio(v);
        into.zero_failed = v.kind == Verdict::Fail ? v.reason : "";
      } else {
        into.nan_fails = fails;
      }
    };
    // The output's judged cells kept, then replaced by the zero answer, the NaN answer (an index tensor:
    // key 0 is its zero, an index past the K/V buffer its NaN) and, for floats, the moved answer.
    auto check = [&](auto& t, auto nan_value) {
      using T = typename std::decay_t<decltype(t)>::value_type;
      std::vector<T> kept(rows.size() * W);
      bool zero = true;
      for (size_t i = 0; i < rows.size(); ++i)
        for (size_t e = 0; e < W; ++e) {
          kept[i * W + e] = t[size_t(rows[i]) * W + e];
          zero = zero && std::fabs(double(kept[i * W + e])) < kNegligible;
        }
      g.exact_zero = zero;
      auto put = [&](auto value_of) {
        for (size_t i = 0; i < rows.size(); ++i)
          for (size_t e = 0; e < W; ++e) t[size_t(rows[i]) * W + e] = value_of(kept[i * W + e]);
      };
      put([](T) { return T(0); });
      judge(g, true);
      put([nan_value](T) { return nan_value; });
      judge(g, false);
      // Moved toward zero by kMovedGates gates at the zero answer's worst cell (every element scaled alike,
      // so no cell moves by more than kMovedGates of its gate).
      if constexpr (std::is_same_v<T, float>) {
        if (g.zero_fails && std::isfinite(g.zero_ratio) && g.zero_ratio > kMovedGates) {
          const double keep = 1 - kMovedGates / g.zero_ratio;
          put([keep](float x) { return std::isfinite(x) ? float(double(x) * keep) : x; });
          const Verdict v = j.judge(w);
          g.moved_ratio = worst_ratio(v);
          g.moved_fails = is_failure(v.kind);
        }
      }
      put([](T x) { return x; });
    };
    if (s.floats)
      check(w.*s.floats, std::numeric_limits<float>::quiet_NaN());
    else
      check(w.*s.indices, int32_t(std::min<int64_t>(l.kv_rows, std::numeric_limits<int32_t>::max())));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace ao

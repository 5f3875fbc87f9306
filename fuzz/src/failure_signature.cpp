#include "attn_oracle/fuzz/failure_signature.h"

#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"

namespace ao {

namespace {

// Gaps before, between or after documents in any buffer, CP chunk padding included.
bool has_padding(const Layout& l) {
  const Case& m = l.c;
  bool pad = m.tail > 0 || m.q_capacity >= 0 || m.kv_capacity >= 0 || !m.o_offsets.empty() ||
             !m.stats_offsets.empty();
  int64_t q = 0, kv = 0;
  for (const auto& d : l.docs) {
    pad |= d.q_padded != d.q_len || d.kv_off != d.packed_kv_off || (!l.is_cp() && d.q_off != d.packed_q_off);
    q += d.q_padded;
    kv += d.kv_len;
  }
  return pad || l.kv_rows != kv || (l.is_cp() ? l.q_rows * m.cp : l.q_rows) != q;
}

}  // namespace

std::string failure_signature(const std::string& backend, const Layout& failing, const Verdict& v) {
  const Case& m = failing.c;
  std::string verdict = verdict_name(v.kind);
  if (v.kind == Verdict::Fail) {
    std::string names;
    for (const auto& n : failing_metrics(v)) names += (names.empty() ? "" : ",") + n;
    verdict += "[" + names + "]";
  }
  const size_t docs = m.q_lens.size();
  return fmt::format("{} {} op={} mask={} window={} cp={} docs={} pad={} dtype={}", backend, verdict,
                     to_string(m.op), to_string(m.mask), m.window > 0 ? "yes" : "no",
                     m.cp > 1 ? "yes" : "no", docs >= 3 ? "3+" : std::to_string(docs),
                     has_padding(failing) ? "yes" : "no", m.dtype == DType::F32 ? "f32" : "16bit");
}

bool smaller_case(const Case& a, const Case& b) {
  auto key = [](const Case& c) {
    const int64_t tokens = std::accumulate(c.q_lens.begin(), c.q_lens.end(), int64_t(0)) +
                           std::accumulate(c.kv_lens.begin(), c.kv_lens.end(), int64_t(0));
    return std::make_tuple(tokens, c.q_lens.size(), print_case(c).size());
  };
  return key(a) < key(b);
}

}  // namespace ao

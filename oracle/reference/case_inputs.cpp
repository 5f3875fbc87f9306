// make_case_inputs (reference.h): the generated inputs plus, under pass=bwd, the forward's saved results.
#include <algorithm>

#include "attn_oracle/internal/rng.h"
#include "attn_oracle/reference/reference.h"

#include "attn_oracle/reference/indexer_backward.h"

namespace ao {

namespace {

// SDPA pass=bwd: O and LSE of the exact forward over every valid row (the backward reads every row's),
// O rounded to the dtype and LSE kept in fp32 as a kernel's forward stores them; their pad slots hold
// the poison (poison=none: generated finite data, like the other inputs' pad slots).
void add_sdpa_saved(const Layout& l, Inputs& in) {
  const Case& c = l.c;
  Layout fwd = l;
  fwd.c.pass = Pass::Fwd;
  fwd.check_rows.clear();
  for (const auto& s : l.segments)
    for (int64_t i = 0; i < s.valid; ++i) fwd.check_rows.push_back(s.row0 + i);
  std::sort(fwd.check_rows.begin(), fwd.check_rows.end());
  fwd.check_row_count = int64_t(fwd.check_rows.size());
  Outputs out;
  out.o.assign(size_t(l.o_rows * c.hq * c.dim_v), 0.f);
  out.lse.assign(size_t(l.stats_rows * c.hq), 0.f);
  reference_sdpa(fwd, in, out);
  const float poison = poison_value(c.poison, c.dtype);
  auto fill_pads = [&](std::vector<float>& t, RowBuffer b, int64_t width, uint32_t tensor) {
    const std::vector<char> valid = valid_rows(l, b);
    for (size_t r = 0; r < valid.size(); ++r) {
      if (valid[r]) continue;
      for (int64_t e = 0; e < width; ++e)
        t[r * size_t(width) + size_t(e)] =
            c.poison == Poison::None
                ? round_to(c.dtype, generated_value(c.seed, tensor | 0x10u, uint64_t(int64_t(r) * width + e), c.levels))
                : poison;
    }
  };
  for (float& x : out.o) x = round_to(c.dtype, x);
  fill_pads(out.o, RowBuffer::O, int64_t(c.hq) * c.dim_v, kTensorSavedO);
  fill_pads(out.lse, RowBuffer::Stats, c.hq, kTensorSavedLse);
  in.o = std::move(out.o);
  in.lse = std::move(out.lse);
}

}  // namespace

Inputs make_case_inputs(const Layout& l) {
  Inputs in = make_inputs(l);
  if (l.c.pass == Pass::Bwd && l.c.op == Op::Sdpa) add_sdpa_saved(l, in);
  if (l.c.op == Op::Indexer && l.c.pass == Pass::Bwd) make_indexer_backward_inputs(l, in);
  return in;
}

}  // namespace ao

// The seams' exact defaults (reference_seams.h).
#include "attn_oracle/reference/reference_seams.h"

#include <algorithm>
#include <limits>

namespace ao {

std::vector<KeyRange> ReferenceSeams::key_ranges(const Layout& l, int64_t r) const {
  const auto& seg = l.seg_of(r);
  int64_t lo, hi;
  l.allowed_range(seg.doc, l.pos_of(r), lo, hi);
  return {{l.docs[size_t(seg.doc)].kv_off, lo, hi}};
}

int64_t ReferenceSeams::q_read_row(const Layout&, int64_t r) const { return r; }

int64_t ReferenceSeams::o_write_row(const Layout& l, int64_t r) const {
  const auto& seg = l.seg_of(r);
  return seg.o_row0 + (r - seg.row0);
}

int64_t ReferenceSeams::stats_write_row(const Layout& l, int64_t r) const {
  const auto& seg = l.seg_of(r);
  return seg.stats_row0 + (r - seg.row0);
}

int ReferenceSeams::kv_head(const Layout& l, int h) const { return h / l.group(); }

void ReferenceSeams::read_key_tile(const Layout& l, const Inputs& in, int, bool, int64_t base, int64_t t0, int64_t n,
                                   float* dst) const {
  std::copy_n(in.k.data() + (base + t0) * l.c.dim, n * l.c.dim, dst);
}

void ReferenceSeams::filter_candidates(std::vector<std::pair<float, int32_t>>&, size_t) const {}
void ReferenceSeams::filter_candidates(std::vector<std::pair<double, int32_t>>&, size_t) const {}

double ReferenceSeams::dq_scale(const Layout& l) const { return l.scale; }
double ReferenceSeams::dk_scale(const Layout& l) const { return l.scale; }

double ReferenceSeams::initial_max() const { return -std::numeric_limits<double>::infinity(); }

const ReferenceSeams& exact_seams() {
  static const ReferenceSeams s;
  return s;
}

}  // namespace ao

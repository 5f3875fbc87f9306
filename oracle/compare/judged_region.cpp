// The judged region (judged_region.h).
#include "attn_oracle/compare/judged_region.h"

#include <algorithm>
#include <cmath>

#include "attn_oracle/compare/tolerance.h"

namespace ao {

namespace {

int64_t row0_in(const QuerySegment& s, RowBuffer b) {
  return b == RowBuffer::Q ? s.row0 : b == RowBuffer::O ? s.o_row0 : s.stats_row0;
}

// Per row of buffer b: 1 where a judged value of an output with these value rows lives.
std::vector<char> value_slots(const Layout& l, RowBuffer b, ValueRows v) {
  if (v == ValueRows::Valid || b == RowBuffer::KV) return valid_rows(l, b);
  std::vector<char> in(size_t(buffer_rows(l, b)), 0);
  for (const auto& s : l.segments) {
    const int64_t r0 = row0_in(s, b);
    for (int64_t i = 0; i < s.rows && r0 + i < int64_t(in.size()); ++i) in[size_t(r0 + i)] = 1;
  }
  return in;
}

const float* float_row(const Outputs& x, const OutputSpec& s, int64_t row) {
  return (x.*s.floats).data() + size_t(row) * size_t(s.width);
}

const int32_t* index_row(const Outputs& x, const OutputSpec& s, int64_t row) {
  return (x.*s.indices).data() + size_t(row) * size_t(s.width);
}

}  // namespace

std::vector<OutputSpec> output_specs(const Case& c) {
  if (c.op == Op::Indexer && c.pass == Pass::Bwd) {  // d_index_q, d_weights over Q rows, d_index_k over K rows
    OutputSpec dq{OutputTensor::Dq, "dq", RowBuffer::Q, int64_t(c.heads) * c.dim, ValueRows::Valid, RowCompare::Floats};
    dq.floats = &Outputs::dq;
    OutputSpec dw{OutputTensor::Dw, "dw", RowBuffer::Q, c.heads, ValueRows::Valid, RowCompare::Floats};
    dw.floats = &Outputs::dw;
    OutputSpec dk{OutputTensor::Dk, "dk", RowBuffer::KV, c.dim, ValueRows::Valid, RowCompare::Floats};
    dk.floats = &Outputs::dk;
    for (OutputSpec* g : {&dq, &dw, &dk}) {  // fp32 gradients: a kernel's rounding of sums over its slots
      g->kernel_rtol = std::ldexp(1.0, -10);
      g->kernel_atol = std::ldexp(1.0, -20);
      g->pad_zero_not_written = c.grad_pad == GradPad::Zero;
    }
    return {dq, dw, dk};
  }
  if (c.op == Op::Indexer) {
    OutputSpec topk{OutputTensor::TopK, "topk", RowBuffer::Q, c.topk, ValueRows::Segment,
                    c.ties == Ties::Strict ? RowCompare::IndexList : RowCompare::IndexSet};
    topk.indices = &Outputs::topk;
    topk.pad_not_written = -1;
    return {topk};
  }
  const double u = std::max(unit_roundoff(c.dtype), std::ldexp(1.0, -16));
  if (c.pass == Pass::Bwd) {  // dQ over Q rows, dK and dV over K/V rows
    OutputSpec dq{OutputTensor::Dq, "dq", RowBuffer::Q, int64_t(c.hq) * c.dim, ValueRows::Valid, RowCompare::Floats};
    dq.floats = &Outputs::dq;
    OutputSpec dk{OutputTensor::Dk, "dk", RowBuffer::KV, int64_t(c.hkv) * c.dim, ValueRows::Valid, RowCompare::Floats};
    dk.floats = &Outputs::dk;
    OutputSpec dv{OutputTensor::Dv, "dv", RowBuffer::KV, int64_t(c.hkv) * c.dim_v, ValueRows::Valid, RowCompare::Floats};
    dv.floats = &Outputs::dv;
    for (OutputSpec* g : {&dq, &dk, &dv}) {  // gradients are O(1) like O under the generated inputs
      g->kernel_rtol = 4 * u;
      g->kernel_atol = 4 * u / 16;
      g->pad_zero_not_written = c.grad_pad == GradPad::Zero;
    }
    return {dq, dk, dv};
  }
  OutputSpec o{OutputTensor::O, "o", RowBuffer::O, int64_t(c.hq) * c.dim_v, ValueRows::Valid, RowCompare::Floats};
  o.floats = &Outputs::o;
  o.kernel_rtol = 4 * u;
  o.kernel_atol = 4 * u / 16;
  OutputSpec lse{OutputTensor::Lse, "lse", RowBuffer::Stats, c.hq, ValueRows::Valid, RowCompare::Floats};
  lse.floats = &Outputs::lse;
  lse.kernel_rtol = lse.kernel_atol = std::ldexp(1.0, -10);
  return {o, lse};
}

JudgedRegion::JudgedRegion(const Layout& l, ValueMatch m)
    : l_(l), m_(m), specs_(output_specs(l.c)), values_(&l.check_rows) {
  auto judged = [&](int64_t r) {
    for (size_t o = 0; o < specs_.size(); ++o)
      if (judges(o, r)) return true;
    return false;
  };
  if (!std::all_of(l.check_rows.begin(), l.check_rows.end(), judged)) {
    for (int64_t r : l.check_rows)
      if (judged(r)) own_values_.push_back(r);
    values_ = &own_values_;
  }
  if (std::any_of(specs_.begin(), specs_.end(), [](const OutputSpec& s) { return s.rows == RowBuffer::KV; }))
    for_each_valid_row(l, RowBuffer::KV, [&](int64_t, int64_t r) { kv_values_.push_back(r); });
  if (l.c.pad_writes != PadWrites::Forbid) return;
  for (size_t o = 0; o < specs_.size(); ++o) {
    const std::vector<char> values = value_slots(l, specs_[o].rows, specs_[o].values);
    for (size_t r = 0; r < values.size(); ++r) {
      if (values[r]) continue;
      if (runs_.empty() || runs_.back().output != int(o) || runs_.back().row0 + runs_.back().rows != int64_t(r))
        runs_.push_back({int(o), int64_t(r), 0, pad_count_});
      ++runs_.back().rows;
      ++pad_count_;
    }
  }
}

JudgedRegion::Unit JudgedRegion::unit(size_t u) const {
  if (u < values_->size()) return {false, -1, (*values_)[u], false};
  if (u < values_->size() + kv_values_.size()) return {false, -1, kv_values_[u - values_->size()], true};
  const int64_t p = int64_t(u - values_->size() - kv_values_.size());
  const auto it = std::upper_bound(runs_.begin(), runs_.end(), p,
                                   [](int64_t x, const PadRun& run) { return x < run.first_unit; }) - 1;
  return {true, it->output, it->row0 + (p - it->first_unit), false};
}

bool JudgedRegion::judges(size_t o, int64_t q_row) const {
  if (specs_[o].rows == RowBuffer::KV || l_.row_segment[size_t(q_row)] < 0) return false;
  return specs_[o].values == ValueRows::Segment || l_.valid_row(q_row);
}

int64_t JudgedRegion::buffer_row(size_t o, int64_t q_row) const {
  const QuerySegment& s = l_.seg_of(q_row);
  return row0_in(s, specs_[o].rows) + (q_row - s.row0);
}

bool JudgedRegion::elem_equal(float x, float y, const OutputSpec& s) const {
  if (f32_bits(x) == f32_bits(y)) return true;
  // The output sentinel is a NaN with its own payload: an unwritten element never equals a written one,
  // not even a computed NaN (whose payload is the arithmetic's, and equals any other computed NaN).
  if (is_sentinel(x) || is_sentinel(y)) return false;
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (m_ != ValueMatch::Kernel || std::isinf(x) || std::isinf(y)) return false;
  const double d = std::fabs(double(x) - double(y)), mag = std::max(std::fabs(double(x)), std::fabs(double(y)));
  return d <= s.kernel_rtol * mag + s.kernel_atol;
}

bool JudgedRegion::rows_equal(size_t o, int64_t row, const Outputs& a, const Outputs& b, bool pad) const {
  const OutputSpec& s = specs_[o];
  const size_t W = size_t(s.width);
  if (s.compare == RowCompare::Floats) {
    const float *x = float_row(a, s, row), *y = float_row(b, s, row);
    // A pad slot under grad_pad=zero: zeros count as unwritten, like the sentinel.
    auto fill = [&](float v) { return pad && s.pad_zero_not_written && v == 0.f ? sentinel_float() : v; };
    for (size_t i = 0; i < W; ++i)
      if (!elem_equal(fill(x[i]), fill(y[i]), s)) return false;
    return true;
  }
  const int32_t *ra = index_row(a, s, row), *rb = index_row(b, s, row);
  if (std::equal(ra, ra + W, rb)) return true;  // the common case, without sorting
  std::vector<int32_t> x(ra, ra + W), y(rb, rb + W);
  if (pad)  // a pad slot is judged on whether it was written: its fill counts as unwritten, its order not at all
    for (auto* v : {&x, &y}) std::replace(v->begin(), v->end(), s.pad_not_written, kSentinelIndex);
  if (s.compare == RowCompare::IndexList && !pad) return x == y;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

bool JudgedRegion::equal(size_t ui, const Outputs& a, const Outputs& b, int output) const {
  const Unit u = unit(ui);
  if (u.pad) return rows_equal(size_t(u.output), u.row, a, b, true);
  if (u.kv) {
    for (size_t o = 0; o < specs_.size(); ++o)
      if ((output < 0 || size_t(output) == o) && specs_[o].rows == RowBuffer::KV && !rows_equal(o, u.row, a, b, false))
        return false;
    return true;
  }
  for (size_t o = 0; o < specs_.size(); ++o) {
    if ((output >= 0 && size_t(output) != o) || !judges(o, u.row)) continue;
    if (!rows_equal(o, buffer_row(o, u.row), a, b, false)) return false;
  }
  return true;
}

std::vector<char> JudgedRegion::differs(const Outputs& x, const Outputs& ref) const {
  std::vector<char> d(size());
  for (size_t u = 0; u < size(); ++u) d[u] = !equal(u, x, ref);
  return d;
}

bool JudgedRegion::any_differs(const Outputs& a, const Outputs& b) const {
  for (size_t u = 0; u < size(); ++u)
    if (!equal(u, a, b)) return true;
  return false;
}

bool JudgedRegion::pad_written(size_t ui, const Outputs& got) const {
  const Unit u = unit(ui);
  return row_written(size_t(u.output), u.row, got);
}

bool JudgedRegion::row_written(size_t o, int64_t row, const Outputs& got) const {
  const OutputSpec& s = specs_[o];
  if (s.compare == RowCompare::Floats) {
    const float* x = float_row(got, s, row);
    return std::any_of(x, x + s.width,
                       [&](float v) { return !is_sentinel(v) && !(s.pad_zero_not_written && v == 0.f); });
  }
  const int32_t* x = index_row(got, s, row);
  return std::any_of(x, x + s.width, [&](int32_t v) { return v != kSentinelIndex && v != s.pad_not_written; });
}

int64_t JudgedRegion::clobbered_pad_slots(const Outputs& got) const { return clobbered_pad_slots(got, -1); }

int64_t JudgedRegion::clobbered_pad_slots(const Outputs& got, int o) const {
  int64_t n = 0;
  for (const PadRun& run : runs_)
    if (o < 0 || run.output == o)
      for (int64_t r = run.row0; r < run.row0 + run.rows; ++r) n += row_written(size_t(run.output), r, got);
  return n;
}

int JudgedRegion::output_of(std::vector<float> Outputs::*field) const {
  for (size_t o = 0; o < specs_.size(); ++o)
    if (specs_[o].floats == field) return int(o);
  return -1;
}

void JudgedRegion::mark_pad_rows(CellMap& map, int o, const Outputs& got) const {
  for (const PadRun& run : runs_)
    if (run.output == o)
      for (int64_t r = run.row0; r < run.row0 + run.rows; ++r) map.pad_row(r, row_written(size_t(o), r, got));
}

}  // namespace ao

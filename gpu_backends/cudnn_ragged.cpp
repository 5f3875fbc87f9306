// Layout -> cuDNN ragged SDPA problem (see cudnn_ragged.h for what is promised).
#include "cudnn_ragged.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "attn_oracle/inputs/tensors.h"

namespace ao::cudnn {

std::string unsupported_reason(const Layout& l) {
  const Case& c = l.c;
  if (c.op != Op::Sdpa) return "cudnn-sdpa runs op=sdpa only";
  if (c.ratio != 1) return fmt::format("cudnn-sdpa has no key compression (ratio={})", c.ratio);
  // The graph maps a causal mask with a left bound only (set_diagonal_band_left_bound).
  if (c.window_right != 0)
    return fmt::format("cudnn-sdpa maps causal bands only (window_right={} is not mapped)", c.window_right);
  if (c.window_convention != WindowConvention::Cudnn)
    return "cudnn-sdpa maps cuDNN's window convention only (window_convention=fa is not mapped)";
  return {};
}

RaggedProblem make_ragged_problem(const Layout& l, bool derived_offsets) {
  const Case& c = l.c;
  RaggedProblem p;
  p.hq = c.hq;
  p.hkv = c.hkv;
  p.d = c.dim;
  p.dv = c.dim_v;
  p.q_rows = l.q_rows;
  p.kv_rows = l.kv_rows;
  p.o_rows = l.o_rows;
  p.stats_rows = l.stats_rows;
  p.scale = l.scale;
  p.window = c.window;
  // Under CP a segment's rows sit at pos0 > 0 of a longer key sequence: bottom-right over the key prefix.
  const bool key_prefix = l.is_cp();
  if (c.mask == MaskKind::None)
    p.mask = CudnnMask::None;
  else if (key_prefix || c.mask == MaskKind::BottomRight)
    p.mask = CudnnMask::BottomRight;
  else
    p.mask = CudnnMask::TopLeft;

  for (size_t i = 0; i < l.segments.size(); ++i) {
    const auto& s = l.segments[i];
    if (s.valid <= 0) continue;  // a wholly-padding chunk: nothing for the kernel to compute
    const auto& d = l.docs[size_t(s.doc)];
    RaggedEntry e;
    e.doc = s.doc;
    e.segment = int(i);
    e.q_row0 = s.row0;
    e.o_row0 = s.o_row0;
    e.stats_row0 = s.stats_row0;
    e.kv_row0 = d.kv_off;
    if (derived_offsets && !l.is_cp()) {  // cu_seqlens where the bound offsets belong
      e.q_row0 = e.o_row0 = e.stats_row0 = d.packed_q_off;
      e.kv_row0 = d.packed_kv_off;
    }
    e.q_len = s.valid;
    e.kv_len = key_prefix && c.mask != MaskKind::None ? std::min(d.kv_len, s.pos0 + s.valid) : d.kv_len;
    p.entries.push_back(e);
    p.max_q = std::max(p.max_q, e.q_len);
    p.max_kv = std::max(p.max_kv, e.kv_len);
  }

  auto offsets = [&](auto row_of, int64_t width, int64_t cap_rows) {
    std::vector<int64_t> off;
    for (const auto& e : p.entries) off.push_back(row_of(e) * width);
    off.push_back(cap_rows * width);
    return off;
  };
  p.q_off = offsets([](const RaggedEntry& e) { return e.q_row0; }, p.hq * p.d, p.q_rows);
  p.k_off = offsets([](const RaggedEntry& e) { return e.kv_row0; }, p.hkv * p.d, p.kv_rows);
  p.v_off = offsets([](const RaggedEntry& e) { return e.kv_row0; }, p.hkv * p.dv, p.kv_rows);
  p.o_off = offsets([](const RaggedEntry& e) { return e.o_row0; }, p.hq * p.dv, p.o_rows);
  p.stats_off = offsets([](const RaggedEntry& e) { return e.stats_row0; }, p.hq, p.stats_rows);
  for (const auto* v : {&p.q_off, &p.k_off, &p.v_off, &p.o_off, &p.stats_off})
    for (int64_t x : *v) p.int64_offsets |= x > std::numeric_limits<int32_t>::max();
  for (const auto& e : p.entries) {
    p.seq_q.push_back(int32_t(e.q_len));
    p.seq_kv.push_back(int32_t(e.kv_len));
  }
  return p;
}

GradKvPlacement grad_kv_placement(const Layout& l, const RaggedProblem& p) {
  GradKvPlacement g;
  std::vector<char> covered(size_t(p.kv_rows), 0);
  for (const auto& e : p.entries)
    for (int64_t j = e.kv_row0; j < e.kv_row0 + e.kv_len; ++j) {
      g.accumulate |= covered[size_t(j)] != 0;
      covered[size_t(j)] = 1;
    }
  int64_t next = 0;
  for (const auto& e : p.entries) {
    g.row0.push_back(g.accumulate ? next : e.kv_row0);
    next += e.kv_len;
  }
  g.rows = g.accumulate ? next : p.kv_rows;
  for (const int64_t r : g.row0) {
    g.dk_off.push_back(r * p.hkv * p.d);
    g.dv_off.push_back(r * p.hkv * p.dv);
  }
  g.dk_off.push_back(g.rows * p.hkv * p.d);
  g.dv_off.push_back(g.rows * p.hkv * p.dv);
  g.zero_rows = valid_rows(l, RowBuffer::KV);
  for (size_t j = 0; j < g.zero_rows.size(); ++j) g.zero_rows[j] = g.zero_rows[j] && !covered[j];
  return g;
}

std::vector<int64_t> dout_offsets(const RaggedProblem& p) {
  std::vector<int64_t> off;
  for (const auto& e : p.entries) off.push_back(e.q_row0 * p.hq * p.dv);
  off.push_back(p.q_rows * p.hq * p.dv);
  return off;
}

namespace {
std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 12; ++i) s += fmt::format("{}{}", i ? "," : "", v[i]);
  return s + (v.size() > 12 ? ",..." : "");
}
std::string list(const std::vector<int32_t>& v) { return list(std::vector<int64_t>(v.begin(), v.end())); }
const char* mask_name(CudnnMask m) {
  return m == CudnnMask::None ? "none" : m == CudnnMask::TopLeft ? "causal-topleft" : "causal-bottomright";
}
}  // namespace

std::string describe(const RaggedProblem& p) {
  return fmt::format(
      "b={} s_q={} s_kv={} hq={} hkv={} d={} dv={} mask={}{} offsets={} seq_q=[{}] seq_kv=[{}] q_off=[{}] "
      "k_off=[{}] v_off=[{}] o_off=[{}] stats_off=[{}]",
      p.batch(), p.max_q, p.max_kv, p.hq, p.hkv, p.d, p.dv, mask_name(p.mask),
      p.window > 0 ? fmt::format(" window={}", p.window) : "", p.int64_offsets ? "int64" : "int32", list(p.seq_q),
      list(p.seq_kv), list(p.q_off), list(p.k_off), list(p.v_off), list(p.o_off), list(p.stats_off));
}

uint16_t to_half_bits(DType t, float x) { return t == DType::F16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x); }

uint16_t half_sentinel_bits(DType t) { return t == DType::F16 ? uint16_t(0x7fa5) : uint16_t(0x7fe5); }

float from_half_bits(DType t, uint16_t bits) {
  if (bits == half_sentinel_bits(t)) return sentinel_float();
  return t == DType::F16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

}  // namespace ao::cudnn

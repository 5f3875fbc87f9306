// `cudnn-sdpa` backend (see cudnn_sdpa.h): host code that builds a cuDNN frontend SDPA graph for the
// case's ragged problem (cudnn_ragged.h), runs it on device buffers that hold every row of the
// oracle's buffers plus a guard band, and copies every row back, pad slots included.
#include "cudnn_sdpa.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/case/case.h"
#include "attn_oracle/inputs/tensors.h"
#include "cudnn_ragged.h"
#include "gpu_common.h"

#if AO_HAVE_CUDNN
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <cudnn_frontend_version.h>
#endif

namespace ao::cudnn {

std::vector<KnobSpec> sdpa_knobs() {
  return {knob_choice("impl", {"composite", "unified", "auto"},
                      "composite: matmul/mask/softmax/matmul the fused engine recognises; unified: the single "
                      "SDPA_FWD operation; auto: the frontend chooses"),
          knob_choice("pad_mask", {"1", "0", "auto"},
                      "bind seq lens + padding mask; auto: omit them when every sequence is full"),
          knob_number("guard", {0, 1 << 20, false, true}, "64", "rows of guard band past every buffer"),
          knob_choice("ragged_stats", {"1", "0"}, "stats in THD with their own ragged offset; 0: padded [b, hq, s_q]"),
          knob_choice("max_total", {"1", "0"},
                      "pass=bwd: bound the workspace by the buffers' rows (set_max_total_seq_len_q/kv, as "
                      "TransformerEngine does for THD); 0: leave them unset"),
          knob_choice("deterministic", {"0", "1"}, "pass=bwd: ask for the deterministic backward algorithm"),
          knob_choice("log", {"0", "1"}, "print the problem, the implementation and the chosen plan to stderr"),
          bug_knob({"derived-offsets", "bwd-cp-dkv-overwrite"},
                   "derived-offsets: every tensor's ragged offsets bound as prefix sums of the lengths "
                   "(cudnn-frontend #737's lowering; cp=1); bwd-cp-dkv-overwrite: pass=bwd on a CP rank: each "
                   "batch entry's dK/dV stored on the host instead of added")};
}

SdpaOptions sdpa_options(const Knobs& k) {
  SdpaOptions o;
  const std::string impl = k.get("impl"), pad = k.get("pad_mask");
  o.impl = impl == "unified" ? Impl::Unified : impl == "auto" ? Impl::Auto : Impl::Composite;
  o.pad_mask = pad == "0" ? PadMask::Off : pad == "auto" ? PadMask::Auto : PadMask::On;
  o.guard_rows = int64_t(k.number("guard"));
  o.ragged_stats = k.flag("ragged_stats");
  o.max_total = k.flag("max_total");
  o.deterministic = k.flag("deterministic");
  o.log = k.flag("log");
  o.derived_offsets = k.get("bug") == "derived-offsets";
  o.cp_dkv_overwrite = k.get("bug") == "bwd-cp-dkv-overwrite";
  return o;
}

SdpaOptions parse_knobs(const std::string& knobs) {
  return sdpa_options(ao::parse_knobs("cudnn-sdpa", knobs, sdpa_knobs()));
}

#if AO_HAVE_CUDNN

namespace fe = cudnn_frontend;

namespace {

std::string version_str(size_t v) { return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100); }

// One cuDNN handle per process (creation is slow), created on first use and deliberately never
// destroyed: at exit the CUDA runtime may already be torn down, and a crash there would turn a
// verdict into a signal exit code.
struct Handle {
  cudnnHandle_t h = nullptr;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  Handle() { status = cudnnCreate(&h); }
};
Handle& handle() {
  static Handle* h = new Handle;
  return *h;
}

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n) AO_CUDA(cudaMalloc(&p, n));
  }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* src, size_t n) { AO_CUDA(cudaMemcpy(p, src, n, cudaMemcpyHostToDevice)); }
  void download(void* dst, size_t n) const { AO_CUDA(cudaMemcpy(dst, p, n, cudaMemcpyDeviceToHost)); }
};

// Values in the case dtype as the device stores them, `rows` rows of `width`, then `guard` rows of `fill`.
std::vector<uint8_t> encode(DType t, const std::vector<float>& x, int64_t width, int64_t guard, float fill) {
  const size_t n = x.size() + size_t(guard * width);
  std::vector<uint8_t> out(n * (t == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    const float v = i < x.size() ? x[i] : fill;
    if (t == DType::F32)
      memcpy(out.data() + 4 * i, &v, 4);
    else {
      const uint16_t h = to_half_bits(t, v);
      memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> sentinel_buffer(DType t, size_t n) {
  std::vector<uint8_t> out(n * (t == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::F32) {
      const uint32_t s = kSentinelBits;
      memcpy(out.data() + 4 * i, &s, 4);
    } else {
      const uint16_t s = half_sentinel_bits(t);
      memcpy(out.data() + 2 * i, &s, 2);
    }
  }
  return out;
}

template <class T>
std::vector<T> as(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

const char* code_name(fe::error_code_t c) {
  switch (c) {
    case fe::error_code_t::OK: return "OK";
    case fe::error_code_t::ATTRIBUTE_NOT_SET: return "ATTRIBUTE_NOT_SET";
    case fe::error_code_t::SHAPE_DEDUCTION_FAILED: return "SHAPE_DEDUCTION_FAILED";
    case fe::error_code_t::INVALID_TENSOR_NAME: return "INVALID_TENSOR_NAME";
    case fe::error_code_t::INVALID_VARIANT_PACK: return "INVALID_VARIANT_PACK";
    case fe::error_code_t::GRAPH_NOT_SUPPORTED: return "GRAPH_NOT_SUPPORTED";
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED: return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
    case fe::error_code_t::GRAPH_EXECUTION_FAILED: return "GRAPH_EXECUTION_FAILED";
    case fe::error_code_t::HEURISTIC_QUERY_FAILED: return "HEURISTIC_QUERY_FAILED";
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT: return "UNSUPPORTED_GRAPH_FORMAT";
    case fe::error_code_t::CUDA_API_FAILED: return "CUDA_API_FAILED";
    case fe::error_code_t::CUDNN_BACKEND_API_FAILED: return "CUDNN_BACKEND_API_FAILED";
    case fe::error_code_t::INVALID_CUDA_DEVICE: return "INVALID_CUDA_DEVICE";
    case fe::error_code_t::HANDLE_ERROR: return "HANDLE_ERROR";
    case fe::error_code_t::INVALID_VALUE: return "INVALID_VALUE";
    case fe::error_code_t::NVRTC_COMPILATION_FAILED: return "NVRTC_COMPILATION_FAILED";
  }
  return "unknown error code";
}

// A failed graph step. Before execution cuDNN declining the graph is a skip; our own binding mistakes
// (attributes, names, variant pack) are errors, as is anything that fails while executing.
struct StepFailure {
  RunStatus status;
};

void step(const char* call, fe::error_t e, bool executing = false) {
  if (e.is_good()) return;
  const auto code = e.get_code();
  const bool ours = code == fe::error_code_t::ATTRIBUTE_NOT_SET || code == fe::error_code_t::INVALID_TENSOR_NAME ||
                    code == fe::error_code_t::INVALID_VARIANT_PACK || code == fe::error_code_t::SHAPE_DEDUCTION_FAILED;
  const std::string why = fmt::format("cudnn_frontend::graph::Graph::{} failed: {}: {}", call, code_name(code),
                                      e.get_message());
  throw StepFailure{{executing || ours ? RunStatus::Error : RunStatus::Skipped, why, 0}};
}

enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kQOff, kKOff, kVOff, kOOff, kStatsOff,
  kDO, kDQ, kDK, kDV, kDOOff, kDQOff, kDKOff, kDVOff
};

namespace graph_parts {
using TA = fe::graph::Tensor_attributes;
using TensorPtr = std::shared_ptr<TA>;

fe::DataType_t io_type(DType t) {
  return t == DType::F16 ? fe::DataType_t::HALF : t == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT;
}

// THD tensors of one graph: token-major rows of h*d; the batch stride is unused once a ragged offset is bound.
struct Thd {
  fe::graph::Graph& g;
  const RaggedProblem& p;
  fe::DataType_t off_t;
  TensorPtr offsets(const char* name, int64_t uid) const {
    return g.tensor(TA().set_name(name).set_uid(uid).set_dim({p.batch() + 1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(off_t));
  }
  // A [b, h, s, w] tensor in THD rows (an input when `t` is null, else it shapes the output `t`).
  TensorPtr rows(TensorPtr t, const char* name, int64_t uid, int64_t h, int64_t s, int64_t w, const char* off_name,
                 int64_t off_uid) const {
    if (!t) t = g.tensor(TA().set_name(name));
    t->set_uid(uid).set_dim({p.batch(), h, s, w}).set_stride({s * h * w, w, h * w, 1}).set_ragged_offset(offsets(off_name, off_uid));
    return t;
  }
  // Stats [b, hq, s_q, 1] fp32: THD rows [stats rows, hq] with their own offset, or padded [b, hq, s_q].
  void stats(const TensorPtr& t, bool ragged) const {
    t->set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({p.batch(), p.hq, p.max_q, 1});
    if (ragged)
      t->set_stride({p.max_q * p.hq, 1, p.hq, 1}).set_ragged_offset(offsets("stats_ragged_offset", kStatsOff));
    else
      t->set_stride({p.hq * p.max_q, p.max_q, 1, 1});
  }
};

// The mask attributes forward and backward share (both attribute classes spell them alike).
template <class Attrs>
void set_mask(fe::graph::Graph& g, const RaggedProblem& p, bool pad_mask, Attrs& a) {
  if (pad_mask) {
    auto lens = [&](const char* name, int64_t uid) {
      return g.tensor(TA().set_name(name).set_uid(uid).set_dim({p.batch(), 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
    };
    a.set_padding_mask(true).set_seq_len_q(lens("seq_q", kSeqQ)).set_seq_len_kv(lens("seq_kv", kSeqKv));
  }
  if (p.mask == CudnnMask::TopLeft) a.set_causal_mask(true);
  if (p.mask == CudnnMask::BottomRight) a.set_causal_mask_bottom_right(true);
  if (p.window > 0) a.set_diagonal_band_left_bound(int(p.window));
}

// validate .. build_plans; returns the plan's name and sets the workspace size.
std::string build(fe::graph::Graph& g, cudnnHandle_t h, int64_t& ws_bytes) {
  step("validate", g.validate());
  step("build_operation_graph", g.build_operation_graph(h));
  step("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A}));
  step("check_support", g.check_support());
  step("build_plans", g.build_plans());
  std::string plan;
  step("get_plan_name", g.get_plan_name(plan));
  step("get_workspace_size", g.get_workspace_size(ws_bytes));
  return plan;
}

float decode(DType t, const std::vector<uint8_t>& buf, size_t i) {
  float v;
  if (t == DType::F32) {
    memcpy(&v, buf.data() + 4 * i, 4);
  } else {
    uint16_t hb;
    memcpy(&hb, buf.data() + 2 * i, 2);
    v = from_half_bits(t, hb);
  }
  return v;
}

// Small device arrays (offsets, lengths) that live as long as one run.
struct SmallBuffers {
  bool int64_offsets = false;
  std::vector<std::unique_ptr<DeviceBuffer>> held;
  void* put(const void* src, size_t n) {
    held.push_back(std::make_unique<DeviceBuffer>(n));
    held.back()->upload(src, n);
    return held.back()->p;
  }
  void* offsets(const std::vector<int64_t>& v) {
    if (int64_offsets) return put(v.data(), v.size() * 8);
    auto v32 = as<int32_t>(v);
    return put(v32.data(), v32.size() * 4);
  }
};

// One device tensor of `rows` rows of `width` plus the guard band, as the device stores the dtype.
struct RowTensor {
  DType t;
  int64_t rows, width, guard;
  DeviceBuffer dev;
  RowTensor(DType t_, int64_t rows_, int64_t width_, int64_t guard_)
      : t(t_), rows(rows_), width(width_), guard(guard_), dev(size_t((rows_ + guard_) * width_) * (t_ == DType::F32 ? 4 : 2)) {}
  size_t elems() const { return size_t((rows + guard) * width); }
  void upload_values(const std::vector<float>& x, float fill) {
    auto b = encode(t, x, width, guard, fill);
    dev.upload(b.data(), b.size());
  }
  void upload_sentinels() {
    auto b = sentinel_buffer(t, elems());
    dev.upload(b.data(), b.size());
  }
  // Every element, decoded; `guard_writes` counts the guard band's elements that are not the sentinel.
  std::vector<float> download(int64_t& guard_writes) const {
    std::vector<uint8_t> b(dev.bytes);
    dev.download(b.data(), b.size());
    std::vector<float> v(size_t(rows * width));
    for (size_t i = 0; i < elems(); ++i) {
      const float x = decode(t, b, i);
      if (i < v.size()) v[i] = x;
      else guard_writes += !is_sentinel(x);
    }
    return v;
  }
};
}  // namespace graph_parts

class CudnnSdpa : public Backend {
 public:
  CudnnSdpa(std::string name, SdpaOptions o) : name_(std::move(name)), opt_(o) {}
  std::string name() const override { return name_; }
  std::string version() const override { return versions(); }
  std::string unavailable_reason() const override {
    if (auto why = gpu::unavailable_reason(); !why.empty()) return why;
    if (handle().status != CUDNN_STATUS_SUCCESS)
      return fmt::format("cudnnCreate failed: {}", cudnnGetErrorString(handle().status));
    return {};
  }
  std::string declines(const Layout& l) const override {
    if (opt_.derived_offsets && l.is_cp()) return "bug=derived-offsets re-creates the cp=1 lowering (no CP rank)";
    return unsupported_reason(l);
  }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    try {
      return l.c.pass == Pass::Bwd ? run_backward(l, in, out) : run_forward(l, in, out);
    } catch (const StepFailure& f) {
      return f.status;
    }
  }

 private:
  // Whether the graph binds sequence lengths with a padding mask; empty `why` when it can be expressed.
  bool pad_mask_for(const RaggedProblem& p, std::string& why) const {
    bool uniform = true;
    for (const auto& e : p.entries) uniform &= e.q_len == p.max_q && e.kv_len == p.max_kv;
    const bool pad_mask = opt_.pad_mask == PadMask::On || (opt_.pad_mask == PadMask::Auto && !uniform);
    if (!pad_mask && !uniform) why = "pad_mask=0 needs every sequence at the full s_q/s_kv (uniform lengths)";
    return pad_mask;
  }

  // Binds what both passes share (the stats offsets, the sequence lengths), runs the graph and waits.
  void execute(fe::graph::Graph& g, cudnnHandle_t h, const RaggedProblem& p, bool pad_mask,
               graph_parts::SmallBuffers& small, std::unordered_map<int64_t, void*>& pack, void* ws) const {
    if (opt_.ragged_stats) pack[kStatsOff] = small.offsets(p.stats_off);
    if (pad_mask) {
      pack[kSeqQ] = small.put(p.seq_q.data(), p.seq_q.size() * 4);
      pack[kSeqKv] = small.put(p.seq_kv.data(), p.seq_kv.size() * 4);
    }
    step("execute", g.execute(h, pack, ws), true);
    AO_CUDA(cudaDeviceSynchronize());
  }

  void log(const RaggedProblem& p, const char* pass, bool pad_mask, const std::string& plan, int64_t ws) const {
    if (!opt_.log) return;
    std::fprintf(stderr, "cudnn-sdpa: %s; pass=%s impl=%s pad_mask=%d plan=%s workspace=%lld B; %s\n",
                 versions().c_str(), pass,
                 opt_.impl == Impl::Composite ? "composite" : opt_.impl == Impl::Unified ? "unified" : "auto",
                 int(pad_mask), plan.c_str(), (long long)ws, describe(p).c_str());
  }

  RunStatus run_forward(const Layout& l, const Inputs& in, Outputs& out) {
    using namespace graph_parts;
    const Case& c = l.c;
    const RaggedProblem p = make_ragged_problem(l, opt_.derived_offsets);
    if (p.batch() == 0) return {};  // no valid query row: nothing to compute, outputs stay sentinels
    const int64_t sq = p.max_q, skv = p.max_kv, hq = p.hq, hkv = p.hkv, d = p.d, dv = p.dv;
    std::string why;
    const bool pad_mask = pad_mask_for(p, why);
    if (!why.empty()) return {RunStatus::Skipped, why, 0};

    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io_type(c.dtype)).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    const Thd thd{*g, p, p.int64_offsets ? fe::DataType_t::INT64 : fe::DataType_t::INT32};
    auto Q = thd.rows(nullptr, "Q", kQ, hq, sq, d, "q_ragged_offset", kQOff);
    auto K = thd.rows(nullptr, "K", kK, hkv, skv, d, "k_ragged_offset", kKOff);
    auto V = thd.rows(nullptr, "V", kV, hkv, skv, dv, "v_ragged_offset", kVOff);
    auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(float(p.scale));
    set_mask(*g, p, pad_mask, attrs);
    attrs.set_implementation(opt_.impl == Impl::Composite ? fe::AttentionImplementation_t::COMPOSITE
                             : opt_.impl == Impl::Unified ? fe::AttentionImplementation_t::UNIFIED
                                                          : fe::AttentionImplementation_t::AUTO);
    auto [O, Stats] = g->sdpa(Q, K, V, attrs);
    thd.rows(O, "O", kO, hq, sq, dv, "o_ragged_offset", kOOff)->set_output(true);
    Stats->set_output(true);
    thd.stats(Stats, opt_.ragged_stats);

    cudnnHandle_t h = handle().h;
    int64_t ws_bytes = 0;
    const std::string plan = build(*g, h, ws_bytes);
    log(p, "fwd", pad_mask, plan, ws_bytes);

    // Buffers: every row of the oracle's buffers plus guard rows.
    const int64_t G = opt_.guard_rows;
    const float fill = poison_value(c.poison, c.dtype);
    const int64_t stats_rows = opt_.ragged_stats ? p.stats_rows : p.batch() * sq;
    RowTensor tq(c.dtype, p.q_rows, hq * d, G), tk(c.dtype, p.kv_rows, hkv * d, G), tv(c.dtype, p.kv_rows, hkv * dv, G),
        to(c.dtype, p.o_rows, hq * dv, G), ts(DType::F32, stats_rows, hq, G);
    DeviceBuffer dws{size_t(ws_bytes)};
    tq.upload_values(in.q, fill);
    tk.upload_values(in.k, fill);
    tv.upload_values(in.v, fill);
    to.upload_sentinels();
    ts.upload_sentinels();

    SmallBuffers small{p.int64_offsets, {}};
    std::unordered_map<int64_t, void*> pack = {
        {kQ, tq.dev.p}, {kK, tk.dev.p}, {kV, tv.dev.p}, {kO, to.dev.p}, {kStats, ts.dev.p},
        {kQOff, small.offsets(p.q_off)}, {kKOff, small.offsets(p.k_off)}, {kVOff, small.offsets(p.v_off)},
        {kOOff, small.offsets(p.o_off)}};
    execute(*g, h, p, pad_mask, small, pack, dws.p);

    // Every row comes back, pad slots included (the oracle checks them for clobbering).
    int64_t guard_writes = 0;
    out.o = to.download(guard_writes);
    const std::vector<float> stats = ts.download(guard_writes);
    if (opt_.ragged_stats)
      out.lse = stats;
    else  // [b, hq, s_q] -> the entries' stats rows (valid rows only)
      for (int64_t e = 0; e < p.batch(); ++e)
        for (int64_t hh = 0; hh < hq; ++hh)
          for (int64_t i = 0; i < p.entries[size_t(e)].q_len; ++i)
            out.lse[size_t((p.entries[size_t(e)].stats_row0 + i) * hq + hh)] = stats[size_t((e * hq + hh) * sq + i)];
    if (guard_writes > 0)
      return {RunStatus::Error,
              fmt::format("cuDNN wrote {} elements past the end of O/stats (guard band of {} rows; plan {})",
                          guard_writes, G, plan), 0};
    return {};
  }

  // The backward graph on the case's own O and LSE (what a training step hands its backward): dQ into the
  // Q-row buffer, dK/dV as grad_kv_placement says, every row back with the pad slots.
  RunStatus run_backward(const Layout& l, const Inputs& in, Outputs& out) {
    using namespace graph_parts;
    const Case& c = l.c;
    const RaggedProblem p = make_ragged_problem(l, opt_.derived_offsets);
    const GradKvPlacement kv = grad_kv_placement(l, p);
    auto zero_uncovered = [&] {
      const size_t wk = size_t(p.hkv * p.d), wv = size_t(p.hkv * p.dv);
      for (size_t r = 0; r < kv.zero_rows.size(); ++r)
        if (kv.zero_rows[r]) {
          std::fill(out.dk.begin() + long(r * wk), out.dk.begin() + long((r + 1) * wk), 0.f);
          std::fill(out.dv.begin() + long(r * wv), out.dv.begin() + long((r + 1) * wv), 0.f);
        }
    };
    if (p.batch() == 0) {  // no valid query row: no gradient to compute, every valid key's is 0
      zero_uncovered();
      return {};
    }
    const int64_t sq = p.max_q, skv = p.max_kv, hq = p.hq, hkv = p.hkv, d = p.d, dv = p.dv;
    std::string why;
    const bool pad_mask = pad_mask_for(p, why);
    if (!why.empty()) return {RunStatus::Skipped, why, 0};
    const std::vector<int64_t> do_off = dout_offsets(p);
    const bool i64 = p.int64_offsets || std::max({do_off.back(), kv.dk_off.back(), kv.dv_off.back()}) > INT32_MAX;

    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io_type(c.dtype)).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    const Thd thd{*g, p, i64 ? fe::DataType_t::INT64 : fe::DataType_t::INT32};
    auto Q = thd.rows(nullptr, "Q", kQ, hq, sq, d, "q_ragged_offset", kQOff);
    auto K = thd.rows(nullptr, "K", kK, hkv, skv, d, "k_ragged_offset", kKOff);
    auto V = thd.rows(nullptr, "V", kV, hkv, skv, dv, "v_ragged_offset", kVOff);
    auto O = thd.rows(nullptr, "O", kO, hq, sq, dv, "o_ragged_offset", kOOff);
    auto dO = thd.rows(nullptr, "dO", kDO, hq, sq, dv, "do_ragged_offset", kDOOff);
    auto Stats = g->tensor(TA().set_name("Stats"));
    thd.stats(Stats, opt_.ragged_stats);
    auto attrs = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(float(p.scale));
    set_mask(*g, p, pad_mask, attrs);
    // Every row an offset may address: the Q buffer, and the larger of the K buffer and the dK/dV rows.
    if (opt_.max_total) attrs.set_max_total_seq_len_q(p.q_rows).set_max_total_seq_len_kv(std::max(p.kv_rows, kv.rows));
    if (opt_.deterministic) attrs.set_deterministic_algorithm(true);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, attrs);
    thd.rows(dQ, "dQ", kDQ, hq, sq, d, "dq_ragged_offset", kDQOff)->set_output(true);
    thd.rows(dK, "dK", kDK, hkv, skv, d, "dk_ragged_offset", kDKOff)->set_output(true);
    thd.rows(dV, "dV", kDV, hkv, skv, dv, "dv_ragged_offset", kDVOff)->set_output(true);

    cudnnHandle_t h = handle().h;
    int64_t ws_bytes = 0;
    const std::string plan = build(*g, h, ws_bytes);
    log(p, kv.accumulate ? "bwd (dK/dV per entry, summed on the host)" : "bwd", pad_mask, plan, ws_bytes);

    const int64_t G = opt_.guard_rows;
    const float fill = poison_value(c.poison, c.dtype);
    const int64_t stats_rows = opt_.ragged_stats ? p.stats_rows : p.batch() * sq;
    RowTensor tq(c.dtype, p.q_rows, hq * d, G), tk(c.dtype, p.kv_rows, hkv * d, G), tv(c.dtype, p.kv_rows, hkv * dv, G),
        to(c.dtype, p.o_rows, hq * dv, G), tdo(c.dtype, p.q_rows, hq * dv, G), ts(DType::F32, stats_rows, hq, G),
        tdq(c.dtype, p.q_rows, hq * d, G), tdk(c.dtype, kv.rows, hkv * d, G), tdv(c.dtype, kv.rows, hkv * dv, G);
    DeviceBuffer dws{size_t(ws_bytes)};
    tq.upload_values(in.q, fill);
    tk.upload_values(in.k, fill);
    tv.upload_values(in.v, fill);
    to.upload_values(in.o, fill);
    tdo.upload_values(in.dout, fill);
    if (opt_.ragged_stats) {
      ts.upload_values(in.lse, fill);
    } else {  // the entries' stats rows -> [b, hq, s_q]; rows past an entry's length hold the poison
      std::vector<float> padded(size_t(stats_rows * hq), fill);
      for (int64_t e = 0; e < p.batch(); ++e)
        for (int64_t hh = 0; hh < hq; ++hh)
          for (int64_t i = 0; i < p.entries[size_t(e)].q_len; ++i)
            padded[size_t((e * hq + hh) * sq + i)] = in.lse[size_t((p.entries[size_t(e)].stats_row0 + i) * hq + hh)];
      ts.upload_values(padded, fill);
    }
    tdq.upload_sentinels();
    tdk.upload_sentinels();
    tdv.upload_sentinels();

    SmallBuffers small{i64, {}};
    void* q_off = small.offsets(p.q_off);  // dQ lands where Q is read
    std::unordered_map<int64_t, void*> pack = {
        {kQ, tq.dev.p}, {kK, tk.dev.p}, {kV, tv.dev.p}, {kO, to.dev.p}, {kDO, tdo.dev.p}, {kStats, ts.dev.p},
        {kDQ, tdq.dev.p}, {kDK, tdk.dev.p}, {kDV, tdv.dev.p},
        {kQOff, q_off}, {kKOff, small.offsets(p.k_off)}, {kVOff, small.offsets(p.v_off)},
        {kOOff, small.offsets(p.o_off)}, {kDOOff, small.offsets(do_off)}, {kDQOff, q_off},
        {kDKOff, small.offsets(kv.dk_off)}, {kDVOff, small.offsets(kv.dv_off)}};
    execute(*g, h, p, pad_mask, small, pack, dws.p);

    int64_t guard_writes = 0;
    out.dq = tdq.download(guard_writes);
    std::vector<float> gk = tdk.download(guard_writes), gv = tdv.download(guard_writes);
    if (!kv.accumulate) {  // every row, pad slots included
      out.dk = std::move(gk);
      out.dv = std::move(gv);
    } else {  // each entry's partial added in fp32 into the K rows; pad slots keep the oracle's sentinels
      auto add = [&](std::vector<float>& dst, const std::vector<float>& src, int64_t w) {
        std::vector<char> seen(size_t(p.kv_rows), 0);
        for (size_t e = 0; e < p.entries.size(); ++e) {
          const auto& en = p.entries[e];
          for (int64_t j = 0; j < en.kv_len; ++j) {
            const size_t row = size_t(en.kv_row0 + j);
            const bool first = !seen[row];
            seen[row] = 1;
            for (int64_t x = 0; x < w; ++x) {
              float& o = dst[row * size_t(w) + size_t(x)];
              const float v = src[size_t((kv.row0[e] + j) * w + x)];
              if (is_sentinel(v) || (!first && is_sentinel(o))) o = sentinel_float();  // unwritten stays unwritten
              else o = first || opt_.cp_dkv_overwrite ? v : o + v;
            }
          }
        }
      };
      add(out.dk, gk, hkv * d);
      add(out.dv, gv, hkv * dv);
    }
    zero_uncovered();
    if (guard_writes > 0)
      return {RunStatus::Error,
              fmt::format("cuDNN wrote {} elements past the end of dQ/dK/dV (guard band of {} rows; plan {})",
                          guard_writes, G, plan), 0};
    return {};
  }

  std::string name_;
  SdpaOptions opt_;
};

}  // namespace

std::string versions() {
  return fmt::format("cuDNN {} (headers {}), cuDNN frontend {}.{}.{}", version_str(cudnnGetVersion()),
                     version_str(CUDNN_VERSION), CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                     CUDNN_FRONTEND_PATCH_VERSION);
}

BackendInfo backend_info() {
  BackendInfo b;
  b.name = "cudnn-sdpa";
  b.description = "cuDNN fused SDPA forward and backward via the cuDNN frontend graph API (THD, ragged offsets per tensor)";
  b.knobs = sdpa_knobs();
  b.unavailable = [] { return CudnnSdpa("cudnn-sdpa", {}).unavailable_reason(); };
  b.make = [](const Knobs& k) {
    return std::make_unique<CudnnSdpa>(k.text().empty() ? "cudnn-sdpa" : "cudnn-sdpa:" + k.text(), sdpa_options(k));
  };
  return b;
}

#else  // built without cuDNN: the backend exists and says why it cannot run

std::string versions() { return "built without cuDNN (cudnn.h, libcudnn or the cuDNN frontend headers not found)"; }

namespace {
class CudnnUnavailable : public Backend {
 public:
  std::string name() const override { return "cudnn-sdpa"; }
  std::string unavailable_reason() const override { return versions(); }
  RunStatus run(const Layout&, const Inputs&, Outputs&) override { return {RunStatus::Skipped, versions(), 0}; }
};
}  // namespace

BackendInfo backend_info() {
  BackendInfo b;
  b.name = "cudnn-sdpa";
  b.description = "cuDNN fused SDPA forward and backward (not built: cuDNN not found)";
  b.knobs = sdpa_knobs();
  b.unavailable = [] { return versions(); };
  b.make = [](const Knobs&) { return std::make_unique<CudnnUnavailable>(); };
  return b;
}

#endif

}  // namespace ao::cudnn

namespace ao::gpu {
BackendInfo cudnn_sdpa_backend() { return cudnn::backend_info(); }
}  // namespace ao::gpu

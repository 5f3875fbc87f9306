// `cudnn-sdpa` backend (see cudnn_sdpa.h): host code that builds a cuDNN frontend SDPA graph for the
// case's ragged problem (cudnn_ragged.h), runs it on device buffers that hold every row of the
// oracle's buffers plus a guard band, and copies every row back, pad slots included.
#include "cudnn_sdpa.h"

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
          knob_choice("log", {"0", "1"}, "print the problem, the implementation and the chosen plan to stderr")};
}

SdpaOptions sdpa_options(const Knobs& k) {
  SdpaOptions o;
  const std::string impl = k.get("impl"), pad = k.get("pad_mask");
  o.impl = impl == "unified" ? Impl::Unified : impl == "auto" ? Impl::Auto : Impl::Composite;
  o.pad_mask = pad == "0" ? PadMask::Off : pad == "auto" ? PadMask::Auto : PadMask::On;
  o.guard_rows = int64_t(k.number("guard"));
  o.ragged_stats = k.flag("ragged_stats");
  o.log = k.flag("log");
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

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kQOff, kKOff, kVOff, kOOff, kStatsOff };

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
  std::string declines(const Layout& l) const override { return unsupported_reason(l); }

  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    try {
      return run_checked(l, in, out);
    } catch (const StepFailure& f) {
      return f.status;
    }
  }

 private:
  RunStatus run_checked(const Layout& l, const Inputs& in, Outputs& out) {
    const Case& c = l.c;
    const RaggedProblem p = make_ragged_problem(l);
    if (p.batch() == 0) return {};  // no valid query row: nothing to compute, outputs stay sentinels
    const int64_t b = p.batch(), sq = p.max_q, skv = p.max_kv, hq = p.hq, hkv = p.hkv, d = p.d, dv = p.dv;
    bool uniform = true;
    for (const auto& e : p.entries) uniform &= e.q_len == sq && e.kv_len == skv;
    const bool pad_mask = opt_.pad_mask == PadMask::On || (opt_.pad_mask == PadMask::Auto && !uniform);
    if (!pad_mask && !uniform)
      return {RunStatus::Skipped, "pad_mask=0 needs every sequence at the full s_q/s_kv (uniform lengths)", 0};

    const auto io = c.dtype == DType::F16 ? fe::DataType_t::HALF
                    : c.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT;
    const auto off_t = p.int64_offsets ? fe::DataType_t::INT64 : fe::DataType_t::INT32;
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    using TA = fe::graph::Tensor_attributes;
    auto offsets = [&](const char* name, int64_t uid) {
      return g->tensor(TA().set_name(name).set_uid(uid).set_dim({b + 1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(off_t));
    };
    auto q_ro = offsets("q_ragged_offset", kQOff), k_ro = offsets("k_ragged_offset", kKOff),
         v_ro = offsets("v_ragged_offset", kVOff), o_ro = offsets("o_ragged_offset", kOOff);
    // THD: token-major rows of h*d; the batch stride is unused once a ragged offset is bound.
    auto Q = g->tensor(TA().set_name("Q").set_uid(kQ).set_dim({b, hq, sq, d}).set_stride({sq * hq * d, d, hq * d, 1}).set_ragged_offset(q_ro));
    auto K = g->tensor(TA().set_name("K").set_uid(kK).set_dim({b, hkv, skv, d}).set_stride({skv * hkv * d, d, hkv * d, 1}).set_ragged_offset(k_ro));
    auto V = g->tensor(TA().set_name("V").set_uid(kV).set_dim({b, hkv, skv, dv}).set_stride({skv * hkv * dv, dv, hkv * dv, 1}).set_ragged_offset(v_ro));

    auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(float(p.scale));
    std::shared_ptr<TA> seq_q, seq_kv;
    if (pad_mask) {
      seq_q = g->tensor(TA().set_name("seq_q").set_uid(kSeqQ).set_dim({b, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
      seq_kv = g->tensor(TA().set_name("seq_kv").set_uid(kSeqKv).set_dim({b, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
      attrs.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    }
    if (p.mask == CudnnMask::TopLeft) attrs.set_causal_mask(true);
    if (p.mask == CudnnMask::BottomRight) attrs.set_causal_mask_bottom_right(true);
    if (p.window > 0) attrs.set_diagonal_band_left_bound(int(p.window));
    attrs.set_implementation(opt_.impl == Impl::Composite ? fe::AttentionImplementation_t::COMPOSITE
                             : opt_.impl == Impl::Unified ? fe::AttentionImplementation_t::UNIFIED
                                                          : fe::AttentionImplementation_t::AUTO);
    auto [O, Stats] = g->sdpa(Q, K, V, attrs);
    O->set_output(true).set_uid(kO).set_dim({b, hq, sq, dv}).set_stride({sq * hq * dv, dv, hq * dv, 1}).set_ragged_offset(o_ro);
    Stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({b, hq, sq, 1});
    if (opt_.ragged_stats)  // THD: row-major [stats rows, hq]
      Stats->set_stride({sq * hq, 1, hq, 1}).set_ragged_offset(offsets("stats_ragged_offset", kStatsOff));
    else  // padded BHS1: [b, hq, s_q]
      Stats->set_stride({hq * sq, sq, 1, 1});

    cudnnHandle_t h = handle().h;
    step("validate", g->validate());
    step("build_operation_graph", g->build_operation_graph(h));
    step("create_execution_plans", g->create_execution_plans({fe::HeurMode_t::A}));
    step("check_support", g->check_support());
    step("build_plans", g->build_plans());
    std::string plan;
    step("get_plan_name", g->get_plan_name(plan));
    int64_t ws_bytes = 0;
    step("get_workspace_size", g->get_workspace_size(ws_bytes));
    if (opt_.log)
      std::fprintf(stderr, "cudnn-sdpa: %s; impl=%s pad_mask=%d plan=%s workspace=%lld B; %s\n", versions().c_str(),
                   opt_.impl == Impl::Composite ? "composite" : opt_.impl == Impl::Unified ? "unified" : "auto",
                   int(pad_mask), plan.c_str(), (long long)ws_bytes, describe(p).c_str());

    // Buffers: every row of the oracle's buffers plus guard rows.
    const int64_t G = opt_.guard_rows;
    const size_t esz = c.dtype == DType::F32 ? 4 : 2;
    const float fill = poison_value(c.poison, c.dtype);
    DeviceBuffer dq((size_t(p.q_rows + G) * hq * d) * esz), dk((size_t(p.kv_rows + G) * hkv * d) * esz),
        dvb((size_t(p.kv_rows + G) * hkv * dv) * esz), dout((size_t(p.o_rows + G) * hq * dv) * esz),
        dstats(size_t((opt_.ragged_stats ? p.stats_rows : b * sq) + G) * hq * 4), dws{size_t(ws_bytes)};
    auto hqbuf = encode(c.dtype, in.q, hq * d, G, fill), hkbuf = encode(c.dtype, in.k, hkv * d, G, fill),
         hvbuf = encode(c.dtype, in.v, hkv * dv, G, fill);
    dq.upload(hqbuf.data(), hqbuf.size());
    dk.upload(hkbuf.data(), hkbuf.size());
    dvb.upload(hvbuf.data(), hvbuf.size());
    const size_t o_elems = size_t(p.o_rows + G) * hq * dv, s_elems = size_t((opt_.ragged_stats ? p.stats_rows : b * sq) + G) * hq;
    auto obuf = sentinel_buffer(c.dtype, o_elems), sbuf = sentinel_buffer(DType::F32, s_elems);
    dout.upload(obuf.data(), obuf.size());
    dstats.upload(sbuf.data(), sbuf.size());

    std::vector<std::unique_ptr<DeviceBuffer>> small;
    auto put = [&](const void* src, size_t n) {
      small.push_back(std::make_unique<DeviceBuffer>(n));
      small.back()->upload(src, n);
      return small.back()->p;
    };
    auto put_offsets = [&](const std::vector<int64_t>& v) {
      if (p.int64_offsets) return put(v.data(), v.size() * 8);
      auto v32 = as<int32_t>(v);
      return put(v32.data(), v32.size() * 4);
    };
    std::unordered_map<int64_t, void*> pack = {
        {kQ, dq.p}, {kK, dk.p}, {kV, dvb.p}, {kO, dout.p}, {kStats, dstats.p},
        {kQOff, put_offsets(p.q_off)}, {kKOff, put_offsets(p.k_off)}, {kVOff, put_offsets(p.v_off)},
        {kOOff, put_offsets(p.o_off)}};
    if (opt_.ragged_stats) pack[kStatsOff] = put_offsets(p.stats_off);
    if (pad_mask) {
      pack[kSeqQ] = put(p.seq_q.data(), p.seq_q.size() * 4);
      pack[kSeqKv] = put(p.seq_kv.data(), p.seq_kv.size() * 4);
    }
    step("execute", g->execute(h, pack, dws.p), true);
    AO_CUDA(cudaDeviceSynchronize());

    dout.download(obuf.data(), obuf.size());
    dstats.download(sbuf.data(), sbuf.size());
    // Every row comes back, pad slots included (the oracle checks them for clobbering).
    const size_t o_in = size_t(p.o_rows) * hq * dv, s_in = size_t(opt_.ragged_stats ? p.stats_rows : b * sq) * hq;
    int64_t guard_writes = 0;
    for (size_t i = 0; i < o_elems; ++i) {
      float v;
      if (c.dtype == DType::F32) {
        memcpy(&v, obuf.data() + 4 * i, 4);
      } else {
        uint16_t hb;
        memcpy(&hb, obuf.data() + 2 * i, 2);
        v = from_half_bits(c.dtype, hb);
      }
      if (i < o_in) out.o[i] = v;
      else guard_writes += !is_sentinel(v);
    }
    for (size_t i = 0; i < s_elems; ++i) {
      float v;
      memcpy(&v, sbuf.data() + 4 * i, 4);
      if (i >= s_in) guard_writes += !is_sentinel(v);
      else if (opt_.ragged_stats) out.lse[i] = v;
    }
    if (!opt_.ragged_stats)  // [b, hq, s_q] -> the entries' stats rows (valid rows only)
      for (int64_t e = 0; e < b; ++e)
        for (int64_t hh = 0; hh < hq; ++hh)
          for (int64_t i = 0; i < p.entries[size_t(e)].q_len; ++i)
            memcpy(&out.lse[size_t((p.entries[size_t(e)].stats_row0 + i) * hq + hh)],
                   sbuf.data() + 4 * size_t((e * hq + hh) * sq + i), 4);
    if (guard_writes > 0)
      return {RunStatus::Error,
              fmt::format("cuDNN wrote {} elements past the end of O/stats (guard band of {} rows; plan {})",
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
  b.description = "cuDNN fused SDPA forward via the cuDNN frontend graph API (THD, ragged offsets per tensor)";
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
  b.description = "cuDNN fused SDPA forward (not built: cuDNN not found)";
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

// A GPU plugin (attn_oracle/backends/plugin.h, ABI v1) wrapping the project's cuda-indexer kernels
// (gpu_backends/indexer_kernel.h: launch_indexer_scores / launch_indexer_topk): what a kernel library
// under bisect looks like to `plugin:`. Host pointers in, device work inside, host pointers out.
// Knobs (the oracle checks the grammar and the bug id): bug=none|topleft-cp (the seed PR's chunk-local
// mask, cpu-bug:topleft-cp), mask=offsets (default, correct)|bottomright, as on the cuda-indexer backend.
// Build (no CMake target, so the ao_gpu glob does not pick it up): scripts/tools/build-gpu-plugin.sh
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn_oracle/case/dtype.h"
#include "attn_oracle/backends/plugin.h"
#include "indexer_kernel.h"

namespace ao::gpu {
// The kernels' error hook (gpu_common.cpp in the main build; fmt-free here).
void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw CudaError(std::string(call) + " failed: " + cudaGetErrorString(e) + " at " + file + ":" + std::to_string(line));
}
}  // namespace ao::gpu

namespace {

using namespace ao::gpu;

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (n) AO_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
  }
  Dev(const T* h, size_t count) : Dev(count) {
    if (n) AO_CUDA(cudaMemcpy(p, h, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Dev() { if (p) cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void download(T* h) const {
    if (n) AO_CUDA(cudaMemcpy(h, p, n * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

int run_indexer(const ao_layout* l, const ao_tensors* t, IdxMask mask) {
  std::vector<IdxSeg> segs;
  std::vector<IdxTile> tiles;
  for (int i = 0; i < l->num_segments; ++i) {
    const ao_segment& s = l->segments[i];
    IdxSeg g;
    g.row0 = s.row0;
    g.rows = s.rows;
    g.valid = s.valid;
    g.pos0 = s.pos0;
    g.key_len = s.key_len;
    g.kv_off = l->docs[s.doc].kv_off;
    add_indexer_segment(g, segs, tiles);
  }
  const int64_t ld = indexer_scores_ld(segs);
  const size_t nq = size_t(l->q_rows) * l->heads * l->dim, nk = size_t(l->kv_rows) * l->dim;
  const bool bf16 = l->dtype == AO_DTYPE_BF16;
  std::vector<uint16_t> qb, kb;
  if (bf16) {  // the values are bf16 already: the conversion is exact
    qb.resize(nq);
    kb.resize(nk);
    for (size_t i = 0; i < nq; ++i) qb[i] = ao::f32_to_bf16_bits(t->q[i]);
    for (size_t i = 0; i < nk; ++i) kb[i] = ao::f32_to_bf16_bits(t->k[i]);
  }
  Dev<uint16_t> dq16(qb.data(), qb.size()), dk16(kb.data(), kb.size());
  Dev<float> dq32(bf16 ? nullptr : t->q, bf16 ? 0 : nq), dk32(bf16 ? nullptr : t->k, bf16 ? 0 : nk);
  Dev<float> dw(t->w, size_t(l->q_rows) * l->heads);
  Dev<IdxSeg> dsegs(segs.data(), segs.size());
  Dev<IdxTile> dtiles(tiles.data(), tiles.size());
  const size_t nout = size_t(l->q_rows) * l->topk;
  Dev<int32_t> didx(t->topk, nout);  // sentinels: rows the kernel must not touch keep them
  std::vector<float> sc_host(nout);
  if (t->scores) std::memcpy(sc_host.data(), t->scores, nout * sizeof(float));
  Dev<float> dsc(sc_host.data(), nout);
  const int64_t tile_bytes = int64_t(kIdxTileRows) * ld * int64_t(sizeof(float));
  const int64_t per_batch = std::clamp<int64_t>((int64_t(4) << 30) / tile_bytes, 1, 65535);
  Dev<float> scratch(size_t(std::min<int64_t>(per_batch, int64_t(tiles.size())) * tile_bytes / 4));

  IdxProblem p;
  p.segs = dsegs.p;
  p.tiles = dtiles.p;
  p.q = bf16 ? static_cast<const void*>(dq16.p) : static_cast<const void*>(dq32.p);
  p.k = bf16 ? static_cast<const void*>(dk16.p) : static_cast<const void*>(dk32.p);
  p.w = dw.p;
  p.st = bf16 ? Storage::BF16 : Storage::F32;
  p.heads = l->heads;
  p.dim = l->dim;
  p.topk = l->topk;
  p.ratio = l->ratio;
  p.scale = float(l->scale);
  p.mask = mask;
  p.causal = l->mask != AO_MASK_NONE;
  p.scores = scratch.p;
  p.ld = ld;
  p.out_idx = didx.p;
  p.out_score = dsc.p;
  for (int64_t b = 0; b < int64_t(tiles.size()); b += per_batch) {
    p.tile0 = b;
    p.ntiles = std::min<int64_t>(per_batch, int64_t(tiles.size()) - b);
    launch_indexer_scores(p, nullptr);
    launch_indexer_topk(p, nullptr);
  }
  AO_CUDA(cudaDeviceSynchronize());
  didx.download(t->topk);
  if (t->scores) dsc.download(t->scores);
  return AO_PLUGIN_OK;
}

}  // namespace

extern "C" {

uint32_t ao_plugin_abi_version(void) { return AO_PLUGIN_ABI_VERSION; }

const char* ao_plugin_name(void) {
  static std::string name = [] {
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    cudaDeviceProp prop{};
    std::string dev = cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.name : "no device";
    return "cuda-indexer plugin 1 (" + dev + ", CUDA runtime " + std::to_string(rt / 1000) + "." +
           std::to_string(rt % 1000 / 10) + ", driver " + std::to_string(drv / 1000) + "." +
           std::to_string(drv % 1000 / 10) + ")";
  }();
  return name.c_str();
}

int ao_plugin_unavailable(char* msg, size_t n) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return 0;
  cudaGetLastError();
  std::snprintf(msg, n, "no usable CUDA device (%s)", e == cudaSuccess ? "none present" : cudaGetErrorString(e));
  return 1;
}

int ao_plugin_run(const ao_layout* l, const ao_tensors* t, const char* knobs, char* msg, size_t n) {
  if (l->abi_version != AO_PLUGIN_ABI_VERSION || l->struct_size != sizeof(ao_layout)) {
    std::snprintf(msg, n, "layout struct of another ABI");
    return AO_PLUGIN_ERROR;
  }
  if (l->op != AO_OP_INDEXER) { std::snprintf(msg, n, "serves op=indexer only"); return AO_PLUGIN_SKIP; }
  if (l->pass != AO_PASS_FWD) { std::snprintf(msg, n, "a forward kernel (pass=bwd not served)"); return AO_PLUGIN_SKIP; }
  if (l->topk > kIdxMaxTopk || l->dim > kIdxMaxDim || l->dim % 4 != 0 || l->heads > kIdxMaxHeads) {
    std::snprintf(msg, n, "outside the kernel's limits (topk <= %d, dim %% 4 == 0 and <= %d, heads <= %d)",
                  kIdxMaxTopk, kIdxMaxDim, kIdxMaxHeads);
    return AO_PLUGIN_SKIP;
  }
  if (l->dtype == AO_DTYPE_F16) { std::snprintf(msg, n, "stores fp32 or bf16 inputs only"); return AO_PLUGIN_SKIP; }
  IdxMask mask = IdxMask::Offsets;
  const std::string k = knobs ? knobs : "";
  for (size_t at = 0; at < k.size();) {
    size_t end = k.find(',', at);
    if (end == std::string::npos) end = k.size();
    const std::string item = k.substr(at, end - at);
    at = end + 1;
    if (item == "bug=topleft-cp" && mask != IdxMask::BottomRight) mask = IdxMask::TopLeft;
    else if (item == "mask=bottomright" && mask != IdxMask::TopLeft) mask = IdxMask::BottomRight;
    else if (item != "bug=none" && item != "mask=offsets") {
      std::snprintf(msg, n, "knob '%s' not served (bug=none|topleft-cp, mask=offsets|bottomright, not both set)",
                    item.c_str());
      return AO_PLUGIN_ERROR;
    }
  }
  try {
    return run_indexer(l, t, mask);
  } catch (const std::exception& e) {
    std::snprintf(msg, n, "%s", e.what());
    return AO_PLUGIN_ERROR;
  }
}

}  // extern "C"

// cuda-sdpa kernel (see sdpa_kernel.h).
#include "sdpa_kernel.h"

namespace ao::gpu {

namespace {

constexpr int SQ = kSdpaTileRows, SK = kSdpaTileKeys, NT = 128, RPW = SQ / (NT / 32), MAXC = kSdpaMaxDim / 32;
static_assert(SK == 32, "lane j scores key j of a tile");

__device__ __forceinline__ float ld(const uint32_t* p, int64_t i) { return __uint_as_float(p[i]); }
__device__ __forceinline__ float ld(const uint16_t* p, int64_t i) { return __uint_as_float(uint32_t(p[i]) << 16); }

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The document's key extent as the kernel sees it (the keys' end and the bottom-right shift): kv_len;
// under split-KV with the bug split_max_seqlen the declared max_seqlen_kv (vLLM flash-attention PR #18).
__device__ __forceinline__ bool max_seqlen_extent(const SdpaProblem& p) {
  return p.split_max_seqlen && p.num_splits > 1;
}
__device__ __forceinline__ int64_t key_extent(const SdpaProblem& p, const SdpaDoc& dc) {
  return max_seqlen_extent(p) ? p.max_seqlen_kv : dc.kv_len;
}

// Allowed keys [lo, hi) (doc coordinates) of segment row i at causal offset `off`; under split-KV only
// those of split `split`, [split * S, (split + 1) * S) with S = split_keys.
__device__ __forceinline__ void row_keys(const SdpaProblem& p, const SdpaSeg& sg, const SdpaDoc& dc, int64_t off,
                                         int split, int64_t i, int64_t& lo, int64_t& hi) {
  lo = hi = 0;
  if (i >= sg.valid) return;
  const int64_t kvl = key_extent(p, dc);
  if (p.mask == 0) {
    hi = kvl;
    if (p.decode_tile_unmasked && dc.q_len == 1) {  // the bug: no boundary mask on the last key tile
      hi = (hi + kSdpaDecodeTileKeys - 1) / kSdpaDecodeTileKeys * kSdpaDecodeTileKeys;
      hi = hi < p.kv_rows - dc.kv_off ? hi : p.kv_rows - dc.kv_off;
    }
  } else {
    const int64_t pos = off + i;
    hi = pos + 1 < 0 ? 0 : pos + 1 > kvl ? kvl : pos + 1;
    if (p.window > 0) {
      lo = pos - p.window + 1;
      lo = lo < 0 ? 0 : lo > hi ? hi : lo;
    }
  }
  if (max_seqlen_extent(p)) {  // keys past kv_len enter; the reads stay inside the buffer
    const int64_t room = p.kv_rows - dc.kv_off;
    hi = hi < room ? hi : room;
    lo = lo < hi ? lo : hi;
  }
  if (p.num_splits > 1) {
    const int64_t s0 = split * p.split_keys, s1 = s0 + p.split_keys;
    lo = lo > s0 ? lo : s0;
    hi = hi < s1 ? hi : s1;
    hi = hi > lo ? hi : lo;
  }
}

// Base rows of a segment's Q, O, stats and its document's K/V.
struct Bases {
  int64_t q, o, s, kv;
};
__device__ __forceinline__ Bases base_rows(const SdpaProblem& p, const SdpaSeg& sg, const SdpaDoc& dc) {
  Bases b{sg.row0, sg.o_row0, sg.stats_row0, dc.kv_off};
  if (p.derived_offsets) {  // the bug: base rows re-derived from the lengths
    int64_t pq = 0, pk = 0;
    for (int d = 0; d < sg.doc; ++d) {
      pq += p.docs[d].q_len;
      pk += p.docs[d].kv_len;
    }
    b.kv = pk;
    if (!p.cp) b.q = b.o = b.s = pq;
  }
  return b;
}

template <class T>
__global__ void __launch_bounds__(NT) sdpa_kernel(SdpaProblem p) {
  extern __shared__ __align__(16) float sm[];
  const int D = p.dim, Dv = p.dim_v, KP = D + 1;
  float* Qs = sm;           // [SQ][D]
  float* Ks = Qs + SQ * D;  // [SK][D+1]: lane j reads row j, conflict-free
  float* Vs = Ks + SK * KP; // [SK][Dv]
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const SdpaTile t = p.tiles[blockIdx.x];
  const SdpaSeg sg = p.segs[t.seg];
  const SdpaDoc dc = p.docs[sg.doc];
  const int h = blockIdx.y, kvh = h / (p.hq / p.hkv);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const float ninf = -__int_as_float(0x7f800000);

  const Bases bases = base_rows(p, sg, dc);
  const int64_t q_base = bases.q, o_base = bases.o, s_base = bases.s, kv_base = bases.kv;
  const int split = blockIdx.z;
  const int64_t off = p.cp ? sg.pos0 : (p.mask == 2 ? key_extent(p, dc) - dc.q_len : 0);

  int64_t lo[RPW], hi[RPW], klo = INT64_MAX, khi = 0;
  for (int r = 0; r < SQ; ++r) {
    int64_t a, b;
    row_keys(p, sg, dc, off, split, t.i0 + r, a, b);
    if (b > a) {
      klo = a < klo ? a : klo;
      khi = b > khi ? b : khi;
    }
  }
#pragma unroll
  for (int rr = 0; rr < RPW; ++rr) row_keys(p, sg, dc, off, split, t.i0 + warp * RPW + rr, lo[rr], hi[rr]);
  int64_t kend = khi;
  if (khi <= klo) klo = kend = 0;
  else if (p.tail_read) {  // the bug: whole tiles, past the sequence end (inside the buffer)
    kend = klo + (khi - klo + SK - 1) / SK * SK;
    kend = kend < p.kv_rows - kv_base ? kend : p.kv_rows - kv_base;
  }

  for (int e = tid; e < SQ * D; e += NT) {
    const int r = e / D, d = e % D;
    const int64_t i = t.i0 + r;
    Qs[e] = i < sg.valid ? ld(q, ((q_base + i) * p.hq + h) * D + d) : 0.f;
  }
  float m[RPW], l[RPW], o[RPW][MAXC];
#pragma unroll
  for (int rr = 0; rr < RPW; ++rr) {
    m[rr] = ninf;
    l[rr] = 0.f;
#pragma unroll
    for (int c = 0; c < MAXC; ++c) o[rr][c] = 0.f;
  }
  const int64_t lim = p.tail_read ? kend : khi;
  for (int64_t t0 = klo; t0 < kend; t0 += SK) {
    __syncthreads();
    for (int e = tid; e < SK * D; e += NT) {
      const int j = e / D, d = e % D;
      const int64_t s = t0 + j;
      Ks[j * KP + d] = s < lim ? ld(k, ((kv_base + s) * p.hkv + kvh) * D + d) : 0.f;
    }
    for (int e = tid; e < SK * Dv; e += NT) {
      const int j = e / Dv, d = e % Dv;
      const int64_t s = t0 + j;
      Vs[e] = s < lim ? ld(v, ((kv_base + s) * p.hkv + kvh) * Dv + d) : 0.f;
    }
    __syncthreads();
    const int64_t s = t0 + lane;
    float x[RPW];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) x[rr] = 0.f;
    for (int d = 0; d < D; ++d) {
      const float kd = Ks[lane * KP + d];
#pragma unroll
      for (int rr = 0; rr < RPW; ++rr) x[rr] = fmaf(Qs[(warp * RPW + rr) * D + d], kd, x[rr]);
    }
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
      const bool ok = s >= lo[rr] && s < hi[rr];
      const float sc = ok ? x[rr] * p.scale : ninf;
      const float mn = fmaxf(m[rr], warp_max(sc));
      float pr = 0.f, corr = 1.f;
      if (mn != ninf) {
        pr = ok ? expf(sc - mn) : 0.f;
        corr = expf(m[rr] - mn);
      }
      l[rr] = l[rr] * corr + warp_sum(pr);
#pragma unroll
      for (int c = 0; c < MAXC; ++c) o[rr][c] *= corr;
      for (int j = 0; j < SK; ++j) {
        const float pj = __shfl_sync(0xffffffffu, pr, j);
#pragma unroll
        for (int c = 0; c < MAXC; ++c)
          if (c * 32 + lane < Dv) o[rr][c] = fmaf(pj, Vs[j * Dv + c * 32 + lane], o[rr][c]);
      }
      m[rr] = mn;
    }
  }
#pragma unroll
  for (int rr = 0; rr < RPW; ++rr) {
    const int64_t i = t.i0 + warp * RPW + rr;
    if (i >= sg.valid) continue;  // pad rows and rows past the segment: never written
    const bool none = m[rr] == ninf;
    const float inv = none ? 0.f : 1.f / l[rr];
    if (p.num_splits > 1) {  // split-KV: this split's partial state (O_j, LSE_j) for the combine
      const int64_t pr = (int64_t(split) * p.ntiles + blockIdx.x) * SQ + warp * RPW + rr;
      float* po = p.part_o + (pr * p.hq + h) * Dv;
#pragma unroll
      for (int c = 0; c < MAXC; ++c)
        if (c * 32 + lane < Dv) po[c * 32 + lane] = none ? 0.f : o[rr][c] * inv;
      if (lane == 0) p.part_lse[pr * p.hq + h] = none ? ninf : m[rr] + logf(l[rr]);
      continue;
    }
    float* orow = p.o + ((o_base + i) * p.hq + h) * Dv;
#pragma unroll
    for (int c = 0; c < MAXC; ++c)
      if (c * 32 + lane < Dv) orow[c * 32 + lane] = none ? 0.f : o[rr][c] * inv;
    if (lane == 0) p.lse[(s_base + i) * p.hq + h] = none ? ninf : m[rr] + logf(l[rr]);
  }
}

// Split-KV combine, one warp per row (lanes over O's channels): LSE = log sum_j exp(LSE_j),
// O = sum_j exp(LSE_j - LSE) O_j; no split with an allowed key (every LSE_j = -inf): O = 0, LSE = -inf.
__global__ void __launch_bounds__(NT) combine_kernel(SdpaProblem p) {
  const SdpaTile t = p.tiles[blockIdx.x];
  const SdpaSeg sg = p.segs[t.seg];
  const SdpaDoc dc = p.docs[sg.doc];
  const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32, Dv = p.dim_v;
  const float ninf = -__int_as_float(0x7f800000);
  const Bases b = base_rows(p, sg, dc);
  // the bug split_combine_stride0: O addressed with batch stride 0 (FlashAttention #1217): every
  // document's rows land on document 0's
  const int64_t o_base = p.split_combine_stride0 ? b.o - dc.o_off + p.docs[0].o_off : b.o;
  for (int rr = 0; rr < RPW; ++rr) {
    const int r = warp * RPW + rr;
    const int64_t i = t.i0 + r;
    if (i >= sg.valid) continue;
    auto part = [&](int j) { return (int64_t(j) * p.ntiles + blockIdx.x) * SQ + r; };
    float mx = ninf;
    for (int j = 0; j < p.num_splits; ++j) mx = fmaxf(mx, p.part_lse[part(j) * p.hq + h]);
    float* orow = p.o + ((o_base + i) * p.hq + h) * Dv;
    if (mx == ninf) {
      for (int c = lane; c < Dv; c += 32) orow[c] = 0.f;
      if (lane == 0) p.lse[(b.s + i) * p.hq + h] = ninf;
      continue;
    }
    float sum = 0.f;
    for (int j = 0; j < p.num_splits; ++j) sum += expf(p.part_lse[part(j) * p.hq + h] - mx);
    const float lse = mx + logf(sum);
    for (int c = lane; c < Dv; c += 32) {
      float acc = 0.f;
      for (int j = 0; j < p.num_splits; ++j)
        acc = fmaf(expf(p.part_lse[part(j) * p.hq + h] - lse), p.part_o[(part(j) * p.hq + h) * Dv + c], acc);
      orow[c] = acc;
    }
    if (lane == 0) p.lse[(b.s + i) * p.hq + h] = lse;
  }
}

}  // namespace

void launch_sdpa(const SdpaProblem& p, cudaStream_t s) {
  if (p.ntiles == 0) return;
  const size_t smem = sizeof(float) * (size_t(SQ) * p.dim + size_t(SK) * (p.dim + 1) + size_t(SK) * p.dim_v);
  const dim3 grid(unsigned(p.ntiles), unsigned(p.hq), unsigned(p.num_splits > 1 ? p.num_splits : 1));
  if (p.st == Storage::F32) {
    AO_CUDA(cudaFuncSetAttribute(sdpa_kernel<uint32_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    sdpa_kernel<uint32_t><<<grid, NT, smem, s>>>(p);
  } else {
    AO_CUDA(cudaFuncSetAttribute(sdpa_kernel<uint16_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    sdpa_kernel<uint16_t><<<grid, NT, smem, s>>>(p);
  }
  AO_CUDA(cudaGetLastError());
  if (p.num_splits > 1) {
    combine_kernel<<<dim3(unsigned(p.ntiles), unsigned(p.hq)), NT, 0, s>>>(p);
    AO_CUDA(cudaGetLastError());
  }
}

}  // namespace ao::gpu

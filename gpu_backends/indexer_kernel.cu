// cuda-indexer kernels (see indexer_kernel.h). fp32 FFMA tiles: a block computes 64 rows x 128 keys;
// the K tile (transposed) and the W tile stay in shared memory across heads, Q is reloaded per head.
#include "indexer_kernel.h"

#include <cfloat>

#include <cub/block/block_scan.cuh>

#include "attn_oracle/case/dtype.h"

namespace ao::gpu {

namespace {

constexpr int TQ = kIdxTileRows, TK = kIdxTileKeys, NT = 256;

__device__ __forceinline__ float ld(const uint32_t* p, int64_t i) { return __uint_as_float(p[i]); }
__device__ __forceinline__ float ld(const uint16_t* p, int64_t i) { return __uint_as_float(uint32_t(p[i]) << 16); }

// Last valid segment row of the tile and its key extent: hi is non-decreasing in i for every mask
// mode, so the tile's widest row is its last valid one.
__device__ __forceinline__ bool tile_extent(const IdxProblem& p, const IdxTile& t, const IdxSeg& sg, int64_t& hi) {
  int64_t last = t.i0 + TQ;
  last = last < sg.rows ? last : sg.rows;
  last = last < sg.valid ? last : sg.valid;
  if (last <= t.i0) return false;
  int64_t lo;
  indexer_row_keys(sg, last - 1, p.mask, p.causal, p.ratio, lo, hi);
  return hi > 0;
}

template <class T>
__global__ void __launch_bounds__(NT) scores_kernel(IdxProblem p) {
  extern __shared__ __align__(16) float sm[];
  const int D = p.dim, H = p.heads, DP = D + 4;
  float* Ks = sm;             // [D][TK]
  float* Qs = Ks + D * TK;    // [TQ][DP]
  float* Ws = Qs + TQ * DP;   // [TQ][H]
  const IdxTile t = p.tiles[p.tile0 + blockIdx.y];
  const IdxSeg sg = p.segs[t.seg];
  int64_t hi;
  if (!tile_extent(p, t, sg, hi)) return;
  const int64_t k0 = int64_t(blockIdx.x) * TK;
  if (k0 >= hi) return;
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;

  // Keys past the tile's extent are never read (they would be other documents or pad slots).
  for (int e = tid; e < TK * D; e += NT) {
    const int j = e / D, d = e % D;
    const int64_t s = k0 + j;
    Ks[d * TK + j] = s < hi ? ld(k, (sg.kv_off + s) * D + d) : 0.f;
  }
  for (int e = tid; e < TQ * H; e += NT) {
    const int r = e / H, h = e % H;
    const int64_t i = t.i0 + r;
    Ws[e] = i < sg.valid ? p.w[(sg.row0 + i) * H + h] : 0.f;  // pad rows are never read
  }
  float acc[4][8];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 8; ++b) acc[a][b] = 0.f;

  for (int h = 0; h < H; ++h) {
    __syncthreads();
    for (int e = tid; e < TQ * D; e += NT) {
      const int r = e / D, d = e % D;
      const int64_t i = t.i0 + r;
      Qs[r * DP + d] = i < sg.valid ? ld(q, ((sg.row0 + i) * H + h) * D + d) : 0.f;
    }
    __syncthreads();
    float dot[4][8];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 8; ++b) dot[a][b] = 0.f;
    for (int d = 0; d < D; d += 4) {
      float4 qa[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) qa[a] = *reinterpret_cast<const float4*>(&Qs[(ty * 4 + a) * DP + d]);
#pragma unroll
      for (int dd = 0; dd < 4; ++dd) {
        const float4 ka = *reinterpret_cast<const float4*>(&Ks[(d + dd) * TK + tx * 4]);
        const float4 kb = *reinterpret_cast<const float4*>(&Ks[(d + dd) * TK + 64 + tx * 4]);
        const float kv[8] = {ka.x, ka.y, ka.z, ka.w, kb.x, kb.y, kb.z, kb.w};
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float qv = dd == 0 ? qa[a].x : dd == 1 ? qa[a].y : dd == 2 ? qa[a].z : qa[a].w;
#pragma unroll
          for (int b = 0; b < 8; ++b) dot[a][b] = fmaf(qv, kv[b], dot[a][b]);
        }
      }
    }
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const float wv = Ws[(ty * 4 + a) * H + h];
#pragma unroll
      for (int b = 0; b < 8; ++b) acc[a][b] = fmaf(wv, fmaxf(dot[a][b], 0.f), acc[a][b]);
    }
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int r = ty * 4 + a;
    if (t.i0 + r >= sg.rows) continue;
    float* dst = p.scores + (int64_t(blockIdx.y) * TQ + r) * p.ld + k0;
    *reinterpret_cast<float4*>(dst + tx * 4) =
        make_float4(p.scale * acc[a][0], p.scale * acc[a][1], p.scale * acc[a][2], p.scale * acc[a][3]);
    *reinterpret_cast<float4*>(dst + 64 + tx * 4) =
        make_float4(p.scale * acc[a][4], p.scale * acc[a][5], p.scale * acc[a][6], p.scale * acc[a][7]);
  }
}

// ---- top-k -------------------------------------------------------------------------------------

constexpr int SNT = 512;

// Order-preserving map float -> uint32 (larger float, larger key); -0 is folded into +0.
__device__ __forceinline__ uint32_t ord(float f) {
  if (f == 0.f) f = 0.f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unord(uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
// Sorting key: score descending, then key index ascending.
__device__ __forceinline__ unsigned long long pack(uint32_t u, int64_t s) {
  return (static_cast<unsigned long long>(u) << 32) | (0xffffffffull - static_cast<unsigned long long>(s));
}

__global__ void __launch_bounds__(SNT) topk_kernel(IdxProblem p) {
  using Scan = cub::BlockScan<int, SNT>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ unsigned int hist[256];
  __shared__ unsigned long long cand[kIdxMaxTopk];
  __shared__ uint32_t s_prefix;
  __shared__ int s_remaining;

  const int64_t lrow = blockIdx.x;  // row of the batch's score scratch
  const IdxTile t = p.tiles[p.tile0 + lrow / TQ];
  const IdxSeg sg = p.segs[t.seg];
  const int64_t i = t.i0 + lrow % TQ;
  if (i >= sg.rows) return;  // past the segment: another segment's row or nobody's, never written
  const int tid = threadIdx.x, K = p.topk;
  int64_t lo, hi;
  indexer_row_keys(sg, i, p.mask, p.causal, p.ratio, lo, hi);
  const int64_t n = hi > lo ? hi - lo : 0;
  const float* src = p.scores + lrow * p.ld + lo;
  // m candidates go to the sort; the slots past them get the -1 / -inf fill, or a knob's defect.
  int m = -1;
  IdxBug fill = IdxBug::None;
  if (p.bug == IdxBug::MaskedKeyFill && i < sg.valid) {
    // The select bins scores as fp16: keys below -65504 share the -inf bin with the tile's lanes past
    // the row. Only keys above that bin are ranked; with fewer than k of them the -inf bin is taken
    // from its out-of-bounds lanes (the fill below), never from the row's low-score keys.
    int above = 0;
    for (int64_t base = 0; base < n && above < K; base += SNT) {
      const int64_t e = base + tid;
      const int f = e < n && src[e] >= kFp16Lowest;
      int pos, agg;
      Scan(scan).ExclusiveSum(f, pos, agg);
      if (f && above + pos < K) cand[above + pos] = pack(ord(src[e]), lo + e);
      above += agg;
      __syncthreads();  // scan storage reuse
    }
    if (above < K) {
      m = above;
      fill = IdxBug::MaskedKeyFill;
    }
  }
  if (m >= 0) {
    // masked-key-fill: the candidates are in place
  } else if (n <= K) {
    for (int64_t e = tid; e < n; e += SNT) cand[e] = pack(ord(src[e]), lo + e);
    m = int(n);
    if (p.bug == IdxBug::SentinelLanes && i < sg.valid && n < K) {
      // The lane past the row holds -FLT_MAX, not -inf: it ranks after the keys and before the fill,
      // and the kernel writes only the ranked lanes.
      if (tid == 0) cand[n] = pack(ord(-FLT_MAX), lo + n);
      m = int(n) + 1;
      fill = IdxBug::SentinelLanes;
    }
  } else {
    uint32_t prefix = 0, mask = 0;
    int remaining = K;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int j = tid; j < 256; j += SNT) hist[j] = 0;
      __syncthreads();
      for (int64_t e = tid; e < n; e += SNT) {
        const uint32_t u = ord(src[e]);
        if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        int cum = 0, b = 255;
        for (; b > 0; --b) {
          if (cum + int(hist[b]) >= remaining) break;
          cum += int(hist[b]);
        }
        s_prefix = prefix | (uint32_t(b) << shift);
        s_remaining = remaining - cum;
      }
      __syncthreads();
      prefix = s_prefix;
      remaining = s_remaining;
      mask |= 0xffu << shift;
    }
    // prefix is the exact k-th largest key; take every larger one and the first `remaining` ties.
    const uint32_t kth = prefix;
    const int need_ties = remaining, n_gt = K - remaining;
    int gt_base = 0, eq_base = 0;
    for (int64_t base = 0; base < n; base += SNT) {
      const int64_t e = base + tid;
      const uint32_t u = e < n ? ord(src[e]) : 0u;
      const int g = e < n && u > kth, q = e < n && u == kth;
      int pos, agg;
      Scan(scan).ExclusiveSum(g | (q << 16), pos, agg);  // two counts of <= 512 in one int
      const int gpos = pos & 0xffff, qpos = pos >> 16;
      if (g) cand[gt_base + gpos] = pack(u, lo + e);
      if (q && eq_base + qpos < need_ties) cand[n_gt + eq_base + qpos] = pack(u, lo + e);
      gt_base += agg & 0xffff;
      eq_base += agg >> 16;
      __syncthreads();  // scan storage reuse
      if (gt_base >= n_gt && eq_base >= need_ties) break;
    }
    m = K;
  }
  int P = 1;
  while (P < m) P <<= 1;
  for (int e = m + tid; e < P; e += SNT) cand[e] = 0ull;
  __syncthreads();
  for (int k2 = 2; k2 <= P; k2 <<= 1)
    for (int j = k2 >> 1; j > 0; j >>= 1) {
      for (int x = tid; x < P; x += SNT) {
        const int y = x ^ j;
        if (y > x) {
          const unsigned long long a = cand[x], b = cand[y];
          const bool desc = (x & k2) == 0;
          if ((a < b) == desc) { cand[x] = b; cand[y] = a; }
        }
      }
      __syncthreads();
    }
  const int64_t row = sg.row0 + i;
  int32_t* oi = p.out_idx + row * K;
  float* os = p.out_score + row * K;
  for (int e = tid; e < K; e += SNT) {
    if (e < m) {
      const unsigned long long c = cand[e];
      oi[e] = int32_t(sg.kv_off + int64_t(0xffffffffull - (c & 0xffffffffull)));
      os[e] = unord(uint32_t(c >> 32));
    } else if (fill == IdxBug::SentinelLanes) {
      // never written
    } else if (fill == IdxBug::MaskedKeyFill) {
      oi[e] = int32_t(sg.kv_off + hi + (e - m));  // the masked lanes hi, hi+1, ...
      os[e] = -__int_as_float(0x7f800000);
    } else {
      oi[e] = -1;
      os[e] = -__int_as_float(0x7f800000);
    }
  }
}

size_t scores_smem(const IdxProblem& p) {
  return sizeof(float) * (size_t(p.dim) * TK + size_t(TQ) * (p.dim + 4) + size_t(TQ) * p.heads);
}

}  // namespace

void launch_indexer_scores(const IdxProblem& p, cudaStream_t s) {
  if (p.ntiles == 0) return;
  const size_t smem = scores_smem(p);
  const dim3 grid(unsigned((p.ld + TK - 1) / TK), unsigned(p.ntiles));
  if (p.st == Storage::F32) {
    AO_CUDA(cudaFuncSetAttribute(scores_kernel<uint32_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    scores_kernel<uint32_t><<<grid, NT, smem, s>>>(p);
  } else {
    AO_CUDA(cudaFuncSetAttribute(scores_kernel<uint16_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    scores_kernel<uint16_t><<<grid, NT, smem, s>>>(p);
  }
  AO_CUDA(cudaGetLastError());
}

void launch_indexer_topk(const IdxProblem& p, cudaStream_t s) {
  if (p.ntiles == 0) return;
  topk_kernel<<<unsigned(p.ntiles * TQ), SNT, 0, s>>>(p);
  AO_CUDA(cudaGetLastError());
}

}  // namespace ao::gpu

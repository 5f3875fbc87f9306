// Inputs and outputs exchanged with backends. All tensors are row-major fp32 holding values already
// rounded to the case dtype (the reference computes on exactly the numbers a kernel got).
//   indexer: q [q_rows, heads, dim], w [q_rows, heads], k [kv_rows, dim]
//            topk [q_rows, topk] int32: KV-buffer row indices, -1 fill; scores [q_rows, topk] optional
//   sdpa:    q [q_rows, hq, dim], k [kv_rows, hkv, dim], v [kv_rows, hkv, dim_v]
//            o [o_rows, hq, dim_v], lse [stats_rows, hq] (natural log; -inf for rows with no key)
// The backward pass (pass=bwd) adds inputs and replaces the outputs; every vector a pass does not use
// stays empty (the forward's backward vectors, the backward's forward outputs).
//   sdpa pass=bwd:    inputs q, k, v, dout [q_rows, hq, dim_v] (dO), o [o_rows, hq, dim_v] (the forward's O,
//                     in the dtype), lse [stats_rows, hq] (fp32); outputs dq [q_rows, hq, dim],
//                     dk [kv_rows, hkv, dim], dv [kv_rows, hkv, dim_v] (under CP: the rank's partial dK/dV
//                     over the whole all-gathered K/V buffer)
//   indexer pass=bwd: inputs q, w, k, topk [q_rows, topk] (the exact forward's top-k), target and predict
//                     [q_rows, topk] (the target and predicted distributions over its slots), grad_loss [1];
//                     outputs dq [q_rows, heads, dim], dk [kv_rows, dim], dw [q_rows, heads], loss [1]
#pragma once
#include <cstdint>
#include <vector>
#include "attn_oracle/layout/layout.h"

namespace ao {

struct Inputs {
  std::vector<float> q, k, v, w;
  std::vector<float> dout, o, lse;                   // sdpa pass=bwd
  std::vector<int32_t> topk;                         // indexer pass=bwd
  std::vector<float> target, predict, grad_loss;     // indexer pass=bwd
};

struct Outputs {
  std::vector<int32_t> topk;
  std::vector<float> scores;
  std::vector<float> o, lse;
  std::vector<float> dq, dk, dv, dw, loss;           // pass=bwd
};

// Output sentinels: a quiet-NaN payload / index no kernel produces, so unwritten rows and writes
// into pad slots are told apart from computed values (including computed NaN).
inline constexpr uint32_t kSentinelBits = 0x7fe5a5a5u;
inline constexpr int32_t kSentinelIndex = -0x5a5a5a5a;
float sentinel_float();
bool is_sentinel(float x);

// Poison written into input pad slots: NaN, +Inf, or (large) the dtype's largest finite value (fp16
// 65504, bf16 3.3895e38, fp32 FLT_MAX); poison=none fills generated finite data instead. The one source
// of the value for every path (in process, exec: files, plugins, GPU device inputs).
float poison_value(Poison p, DType t);

Inputs make_inputs(const Layout& l);
Outputs make_sentinel_outputs(const Layout& l);

// Canonical token id used to key the RNG: inputs depend on (document, token index among its q tokens),
// not on buffer placement or mask position, so the same tokens get the same values under any padding,
// CP split or alignment. q_token_id: the id of Q row r (packed_q_off + token index), -1 for a pad slot.
int64_t q_token_id(const Layout& l, int64_t r);

}  // namespace ao

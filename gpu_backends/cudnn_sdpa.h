// `cudnn-sdpa`: cuDNN's fused SDPA forward and backward through the cuDNN frontend C++ graph API, the way
// TransformerEngine calls it for THD: ragged offset tensors bound per tensor (Q, K, V, O, stats),
// actual sequence lengths with a padding mask, causal top-left / bottom-right, sliding window, GQA,
// bf16/fp16 (fp32 is offered to cuDNN, which may decline it), fp32 stats.
//
// Stats: cuDNN's Stats output is the natural-log LSE, max + ln(sum exp(s - max)) over the scaled
// scores (frontend docs; the composite graph computes it with a LOG pointwise). The backend writes it
// unchanged into Outputs::lse, which is natural log too; the device campaign checks it against the
// reference (a base-2 LSE would fail lse_max_err, see the lse-log2 bug model).
//
// Knobs (`cudnn-sdpa:impl=unified,guard=0`):
//   impl=composite|unified|auto  composite (default): the frontend composes matmul/mask/softmax/matmul
//                                that the fused flash engine recognises; unified: the single
//                                SDPA_FWD backend operation; auto: the frontend chooses.
//   pad_mask=1|0|auto            bind seq lens + padding mask (default 1); auto: omit them when every
//                                sequence has the full s_q/s_kv (the no-mask shape old SDPA_FWD takes)
//   guard=N                      rows of guard band past every buffer (default 64): inputs hold the
//                                poison there, outputs the sentinel; a write into it is an error
//   ragged_stats=1|0             stats in THD with their own ragged offset (default 1, as TE does
//                                from cuDNN 9.6); 0: the padded [b, hq, s_q] layout, scattered back
//                                to the stats rows on the host (valid rows only)
//   max_total=1|0                pass=bwd: set_max_total_seq_len_q/kv to the buffers' rows (default 1,
//                                what TransformerEngine sets for THD from cuDNN 9.6); 0: unset
//   deterministic=0|1            pass=bwd: set_deterministic_algorithm
//   log=1                        print the problem, the implementation and the chosen plan to stderr
// pass=bwd: sdpa_backward on the case's own O (dtype) and LSE (fp32 stats, natural log) with dO; dQ is
// written through Q's offsets, dK/dV as grad_kv_placement (cudnn_ragged.h) says: straight into the K rows
// when no two batch entries share keys, else per entry and summed on the host (a CP rank's zigzag chunks).
// A graph cuDNN declines (validate, heuristics, support check, plan build) is SKIPPED with the call
// and cuDNN's message; an execution or CUDA failure is an ERROR naming the call.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attn_oracle/backends/backend.h"

namespace ao::cudnn {

enum class Impl { Composite, Unified, Auto };
enum class PadMask { On, Off, Auto };

struct SdpaOptions {
  Impl impl = Impl::Composite;
  PadMask pad_mask = PadMask::On;
  int64_t guard_rows = 64;
  bool ragged_stats = true;
  bool max_total = true;
  bool deterministic = false;
  bool log = false;
  // Re-created defects (bug=<id>, the cpu-bug models' ids): derived-offsets binds every tensor's ragged
  // offsets as prefix sums of the lengths (cudnn-frontend #737's lowering; not under CP);
  // bwd-cp-dkv-overwrite stores each CP entry's dK/dV on the host instead of adding it.
  bool derived_offsets = false, cp_dkv_overwrite = false;
};

// The knobs above, for the registry (attn_oracle/backends/knobs.h), and the options they set.
std::vector<KnobSpec> sdpa_knobs();
SdpaOptions sdpa_options(const Knobs& k);
// Parses `knobs` with the registry's parser; throws BadInput(key="backend") naming the bad knob.
SdpaOptions parse_knobs(const std::string& knobs);
// The registry entry (built with or without cuDNN).
BackendInfo backend_info();

// "cuDNN 9.14.0 (headers 9.19.0), frontend 1.32.0", or why cuDNN is not built in.
std::string versions();

}  // namespace ao::cudnn

// Deliberately naive fp64 re-implementation of the oracle's semantics, for cross-checking the
// production path (layout.cpp, reference_*.cpp). It shares no helper with it: offsets, CP chunk
// positions, pad rows and allowed keys are re-derived here from the ao::Case fields alone, with plain
// loops and no Eigen, following docs/case.md, docs/ops.md and the comment at the top of attn_oracle/layout/layout.h.
// Only the input tensors (ao::make_inputs, tested on its own in test_inputs.cpp) are shared.
#pragma once
#include <cstdint>
#include <vector>

#include "attn_oracle/inputs/tensors.h"

namespace naive {

// One local Q row of this rank that belongs to a query segment (a document chunk).
struct QRow {
  int64_t row = 0;        // local Q row (== O row and stats row under CP)
  int64_t o_row = 0, stats_row = 0;
  int doc = 0;
  int seg = 0;            // index of the segment (document chunk) in the order documents/chunks appear
  int64_t tok = 0;        // index among the document's q tokens (what keys its inputs)
  int64_t pos = 0;        // document position (the row's causal position)
  bool valid = false;     // a real token; false = pad row inside a chunk
};

struct Segment {
  int doc = 0, chunk = -1;
  int64_t row0 = 0, rows = 0, valid = 0, tok0 = 0, pos0 = 0;
};

struct NaiveLayout {
  // Global rows of each document in each buffer (q/o/stats offsets are global even under CP).
  std::vector<int64_t> q_off, kv_off, o_off, stats_off;
  std::vector<int64_t> q_len, kv_len;
  int64_t q_cap = 0, kv_cap = 0;   // global buffer rows
  int64_t q_rows = 0;              // rows of this rank's Q/O/stats buffers
  std::vector<Segment> segs;
  std::vector<QRow> rows;          // every segment row, in local row order of segments
  std::vector<int> row_owner;      // per local Q row: index into `rows`, or -1 (pad slot outside segments)
  std::vector<int> kv_owner;       // per global KV row: document or -1 (pad slot)
};

// Derives the layout of a *valid* case (validation itself is tested in test_case_line.cpp).
NaiveLayout derive(const ao::Case& c);

// Allowed keys of a row at position p of document `doc`, in document coordinates [lo, hi).
void allowed(const ao::Case& c, const NaiveLayout& nl, int doc, int64_t p, int64_t& lo, int64_t& hi);

double scale_of(const ao::Case& c);

// Indexer: exact score of (Q row, KV buffer row) and the row's magnitude bound
// scale * sum_h |w_h| * sum_d |q_hd k_d| (what an fp32 evaluation's error is relative to).
double indexer_score(const ao::Case& c, const ao::Inputs& in, int64_t q_row, int64_t kv_row);
double indexer_magnitude(const ao::Case& c, const ao::Inputs& in, int64_t q_row, int64_t kv_row);

struct TopK {
  std::vector<int32_t> idx;     // topk entries: KV buffer rows by (score desc, row asc), then -1
  std::vector<double> score;    // matching scores, -inf for -1 entries
  int64_t allowed = 0;          // allowed key count of the row
  double kth = 0;               // k-th best score (or the last allowed one), valid when allowed > 0
};
TopK indexer_row(const ao::Case& c, const NaiveLayout& nl, const ao::Inputs& in, const QRow& r);

// SDPA: O [hq][dim_v] and LSE [hq] of one valid row; no allowed key gives O = 0, LSE = -inf. Per head
// also the magnitudes the tolerances scale with, over the normalised weights p_j (0 without a key):
// score_abs = sum_j p_j scale sum_d |q_d k_jd|, v_abs = max_e sum_j p_j |v_je|, v_rms = max_e
// sqrt(sum_j p_j^2 v_je^2).
struct SdpaRow {
  std::vector<double> o, lse, score_abs, v_abs, v_rms;
  int64_t allowed = 0;
};
SdpaRow sdpa_row(const ao::Case& c, const NaiveLayout& nl, const ao::Inputs& in, const QRow& r);

// Backward passes from their definitions, over the whole rank (dense loops, fp64). Each gradient comes
// with the sum of its terms' magnitudes (what an fp32 evaluation's rounding is relative to).
// SDPA (pass=bwd): P = exp(scale q.k - lse) from the given LSE, D = rowsum(dO o O) from the given O,
// dS = P o (dP - D); dq = scale dS K, dk = scale dS^T Q, dv = P^T dO, summed over each GQA group.
// Rows without an allowed key contribute nothing. Under CP: the rank's partial dK/dV.
struct SdpaGrads {
  std::vector<double> dq, dk, dv, dq_mag, dk_mag, dv_mag;
};
SdpaGrads sdpa_bwd(const ao::Case& c, const NaiveLayout& nl, const ao::Inputs& in);

// Indexer (pass=bwd): KL(target || predict) over each valid row's selected slots (-1 slots skipped),
// both clipped to [-100, 0] in log space, divided by the loss_mean denominator; dL/dlogit =
// (g - predict sum g) with g = -target where log predict >= -100; logits = scale sum_h w_h relu(q_h.k).
struct IndexerGrads {
  std::vector<double> dq, dw, dk, dq_mag, dw_mag, dk_mag;
  double loss = 0, loss_mag = 0;
};
IndexerGrads indexer_bwd(const ao::Case& c, const NaiveLayout& nl, const ao::Inputs& in);

}  // namespace naive

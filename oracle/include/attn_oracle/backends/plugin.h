/* attn-oracle plugin ABI (C, versioned). A kernel library under test exports these symbols and is
 * loaded with `--backend plugin:<path/to/lib.so>[:<knobs>]`. The harness checks the ABI version
 * first; a library that reports another version, or lacks a required symbol, is refused with an
 * error naming it.
 *
 * Required:
 *   uint32_t ao_plugin_abi_version(void);          returns AO_PLUGIN_ABI_VERSION it was built with (2; a
 *                                                  library built against version 1 still runs forward cases)
 *   const char* ao_plugin_name(void);              short name and version, e.g. "my-indexer 1.2 (sm90)"
 *   int ao_plugin_run(const ao_layout*, const ao_tensors*, const char* knobs, char* msg, size_t msg_len);
 *       fills the outputs; returns AO_PLUGIN_OK, AO_PLUGIN_SKIP (msg = why it cannot serve the case)
 *       or AO_PLUGIN_ERROR (msg = what failed). Must not throw across the boundary.
 * Optional:
 *   int ao_plugin_unavailable(char* msg, size_t msg_len);   nonzero = cannot run here (no GPU, ...)
 *
 * Data: every pointer is host memory. Inputs are fp32 arrays holding values already rounded to `dtype`
 * (a bf16 kernel converts them exactly). Shapes, row-major (the exec: protocol's tensors, same names):
 * pass = AO_PASS_FWD (version 1's only pass):
 *   indexer: q [q_rows, heads, dim], w [q_rows, heads], k [kv_rows, dim];
 *            out: topk [q_rows, topk] int32 (KV buffer rows, -1 fill), scores [q_rows, topk] (optional)
 *   sdpa:    q [q_rows, hq, dim], k [kv_rows, hkv, dim], v [kv_rows, hkv, dim_v];
 *            out: o [o_rows, hq, dim_v], lse [stats_rows, hq] (natural log, -inf for rows with no key)
 * pass = AO_PASS_BWD (version 2), the forward's outputs handed in as a training step hands them over:
 *   sdpa:    q, k, v as above; dout [q_rows, hq, dim_v]; fwd_o [o_rows, hq, dim_v] (O in the dtype),
 *            fwd_lse [stats_rows, hq] (exact fp32); out: dq [q_rows, hq, dim], dk [kv_rows, hkv, dim],
 *            dv [kv_rows, hkv, dim_v]. A CP rank's dk/dv is its partial over the whole K/V buffer (its own
 *            queries' contributions; the framework's reduce-scatter sums the ranks'). Every valid K/V row
 *            is written (0 where no query of this rank attends it); a row with no allowed key has dq 0.
 *   indexer: q, w, k as above; fwd_topk [q_rows, topk] int32 (the exact forward's), target and predict
 *            [q_rows, topk] (exact fp32 distributions over each row's slots; -1 slots hold poison),
 *            grad_loss [1]; loss_mean names the mean the loss is divided by;
 *            out: dq [q_rows, heads, dim], dk [kv_rows, dim] (a CP rank's partial, as for sdpa),
 *            dw [q_rows, heads], loss [1] (optional). The loss and gradients: docs/ops.md, "The
 *            indexer's training path" / attn_oracle/reference/indexer_backward.h.
 * Pointers a pass does not use are null. Outputs arrive filled with a sentinel; write valid rows only
 * (pad slots must stay untouched unless pad_writes=allow; gradient rows of pad slots unless
 * grad_pad_zero_allowed, when zeros are accepted too). A GPU plugin copies to and from the device itself.
 * Semantics of rows, segments and allowed keys: docs/case.md / attn_oracle/layout/layout.h. In short: row i of a
 * segment sits at document position pos0 + i; a document's q tokens t sit at shift + t, shift = 0 for
 * top-left, and for bottom-right the queries are the document's last q_len positions, shift =
 * kv_len*ratio - q_len (sdpa: kv_len - q_len), with and without CP (CP splits tokens t). Indexer keys
 * allowed at position p: s < clamp(floor((p+1)/ratio), 0, kv_len); sdpa: s <= p + window_right (a right
 * bound of -1: every key), and s > p - window (AO_WINDOW_FA: s >= p - window; window 0 under the cuDNN
 * convention or -1: no left bound); mask none: every key.
 * Poison in input pad slots: NaN, +inf, or (poison=large) the dtype's largest finite value. */
#ifndef ATTN_ORACLE_PLUGIN_H
#define ATTN_ORACLE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AO_PLUGIN_ABI_VERSION 2u

enum { AO_PLUGIN_OK = 0, AO_PLUGIN_ERROR = 1, AO_PLUGIN_SKIP = 2 };
enum { AO_OP_INDEXER = 0, AO_OP_SDPA = 1 };
enum { AO_DTYPE_F32 = 0, AO_DTYPE_BF16 = 1, AO_DTYPE_F16 = 2 };
enum { AO_MASK_NONE = 0, AO_MASK_TOPLEFT = 1, AO_MASK_BOTTOMRIGHT = 2 };
enum { AO_CP_ZIGZAG = 0, AO_CP_CONTIGUOUS = 1 };
enum { AO_PASS_FWD = 0, AO_PASS_BWD = 1 };
enum { AO_WINDOW_CUDNN = 0, AO_WINDOW_FA = 1 };
enum { AO_LOSS_MEAN_ROWS = 0, AO_LOSS_MEAN_VALID = 1, AO_LOSS_MEAN_KEYED = 2, AO_LOSS_MEAN_SUM = 3 };

typedef struct ao_doc {
  int64_t q_len, kv_len;                  /* valid tokens */
  int64_t q_off, kv_off, o_off, stats_off; /* ragged offsets in rows (q/o/stats global under CP) */
  int64_t q_padded;                       /* padded q length (what CP partitions) */
  int64_t packed_q_off, packed_kv_off;    /* prefix sums of valid lengths (cu_seqlens) */
} ao_doc;

typedef struct ao_segment { /* a contiguous run of this rank's query rows */
  int32_t doc, chunk;        /* chunk -1 without CP */
  int64_t row0, o_row0, stats_row0; /* first Q / O / stats row in the (local) buffers */
  int64_t pos0;              /* document position of row0: the segment's q_causal_offset */
  int64_t rows, valid;       /* rows [0, valid) are tokens, the rest pad rows */
  int64_t key_len;           /* keys the kernel sees for this segment (crop: the chunk's end) */
} ao_segment;

typedef struct ao_layout {
  uint32_t abi_version;      /* AO_PLUGIN_ABI_VERSION of the harness */
  uint32_t struct_size;      /* sizeof(ao_layout) of the harness */
  int32_t op, dtype, mask;
  int32_t cp, rank, cp_scheme, crop;
  int32_t pad_writes_allowed;
  int64_t window;
  int32_t heads, dim, topk, ratio; /* indexer */
  int32_t hq, hkv, dim_v;          /* sdpa (dim shared) */
  double scale;
  int64_t q_rows, kv_rows, o_rows, stats_rows;
  int32_t num_docs, num_segments;
  const ao_doc* docs;
  const ao_segment* segments;
  const char* case_line;     /* canonical case line, for messages */
  /* version 2 (a version-1 library is handed struct_size = AO_LAYOUT_V1_SIZE and forward cases only) */
  int32_t pass;                  /* AO_PASS_FWD | AO_PASS_BWD */
  int32_t grad_pad_zero_allowed; /* bwd: gradient rows of pad slots may be zeroed (grad_pad=zero) */
  int32_t loss_mean;             /* indexer bwd: AO_LOSS_MEAN_* (the loss's denominator: Q buffer rows,
                                    valid rows, valid rows with a selected key, or 1) */
  /* version 2: the conventions version 1 could not express (a version-1 library is not handed a case
     that uses them) and what a kernel is given beside the lengths */
  int64_t window_right;          /* sdpa: right bound, 0 = causal s <= p, > 0: s <= p + window_right, -1: none */
  int32_t window_convention;     /* sdpa: AO_WINDOW_CUDNN (left bound s > p - window) | AO_WINDOW_FA (s >= p - window) */
  int32_t empty_rows_posinf;     /* sdpa: LSE of a row with no allowed key is +inf (else -inf); O = 0 either way */
  int32_t ties_strict;           /* indexer: equal scores in ascending key-row order (else any valid set) */
  int32_t num_splits;            /* sdpa split-KV splits a kernel is asked for (the exact result is the same) */
  int64_t max_seqlen_q, max_seqlen_kv; /* the max_seqlen a kernel is given (>= every length) */
} ao_layout;
#define AO_LAYOUT_V1_SIZE offsetof(ao_layout, pass)

typedef struct ao_tensors {
  const float *q, *k, *v, *w; /* v null for the indexer, w null for sdpa */
  int32_t* topk;              /* forward outputs */
  float* scores;
  float *o, *lse;
  /* version 2: the backward's inputs and outputs (null under pass = AO_PASS_FWD) */
  const float *dout, *fwd_o, *fwd_lse;          /* sdpa */
  const int32_t* fwd_topk;                      /* indexer */
  const float *target, *predict, *grad_loss;    /* indexer */
  float *dq, *dk, *dv, *dw, *loss;              /* dv: sdpa; dw, loss: indexer */
} ao_tensors;

typedef uint32_t (*ao_plugin_abi_version_fn)(void);
typedef const char* (*ao_plugin_name_fn)(void);
typedef int (*ao_plugin_run_fn)(const ao_layout*, const ao_tensors*, const char* knobs, char* msg, size_t msg_len);
typedef int (*ao_plugin_unavailable_fn)(char* msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_ORACLE_PLUGIN_H */

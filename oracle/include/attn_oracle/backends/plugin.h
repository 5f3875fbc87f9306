/* attn-oracle plugin ABI (C, versioned). A kernel library under test exports these symbols and is
 * loaded with `--backend plugin:<path/to/lib.so>[:<knobs>]`. The harness checks the ABI version
 * first; a library that reports another version, or lacks a required symbol, is refused with an
 * error naming it.
 *
 * Required:
 *   uint32_t ao_plugin_abi_version(void);          returns AO_PLUGIN_ABI_VERSION it was built with
 *   const char* ao_plugin_name(void);              short name and version, e.g. "my-indexer 1.2 (sm90)"
 *   int ao_plugin_run(const ao_layout*, const ao_tensors*, const char* knobs, char* msg, size_t msg_len);
 *       fills the outputs; returns AO_PLUGIN_OK, AO_PLUGIN_SKIP (msg = why it cannot serve the case)
 *       or AO_PLUGIN_ERROR (msg = what failed). Must not throw across the boundary.
 * Optional:
 *   int ao_plugin_unavailable(char* msg, size_t msg_len);   nonzero = cannot run here (no GPU, ...)
 *
 * Data (version 1): every pointer is host memory. Inputs are fp32 arrays holding values already
 * rounded to `dtype` (a bf16 kernel converts them exactly). Shapes, row-major:
 *   indexer: q [q_rows, heads, dim], w [q_rows, heads], k [kv_rows, dim];
 *            topk [q_rows, topk] int32 (KV buffer rows, -1 fill), scores [q_rows, topk] (optional to fill)
 *   sdpa:    q [q_rows, hq, dim], k [kv_rows, hkv, dim], v [kv_rows, hkv, dim_v];
 *            o [o_rows, hq, dim_v], lse [stats_rows, hq] (natural log, -inf for rows with no key)
 * Outputs arrive filled with a sentinel; write valid rows only (pad slots must stay untouched
 * unless pad_writes=allow). A GPU plugin copies to and from the device itself.
 * Semantics of rows, segments and allowed keys: README.md / attn_oracle/layout/layout.h. In short: row i of a
 * segment sits at document position pos0 + i; a document's q tokens t sit at shift + t, shift = 0 for
 * top-left, and for bottom-right the queries are the document's last q_len positions, shift =
 * kv_len*ratio - q_len (sdpa: kv_len - q_len), with and without CP (CP splits tokens t). Indexer keys
 * allowed at position p: s < clamp(floor((p+1)/ratio), 0, kv_len); sdpa: s <= p (window: s > p - window).
 * Poison in input pad slots: NaN, +inf, or (poison=large) the dtype's largest finite value. */
#ifndef ATTN_ORACLE_PLUGIN_H
#define ATTN_ORACLE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AO_PLUGIN_ABI_VERSION 1u

enum { AO_PLUGIN_OK = 0, AO_PLUGIN_ERROR = 1, AO_PLUGIN_SKIP = 2 };
enum { AO_OP_INDEXER = 0, AO_OP_SDPA = 1 };
enum { AO_DTYPE_F32 = 0, AO_DTYPE_BF16 = 1, AO_DTYPE_F16 = 2 };
enum { AO_MASK_NONE = 0, AO_MASK_TOPLEFT = 1, AO_MASK_BOTTOMRIGHT = 2 };
enum { AO_CP_ZIGZAG = 0, AO_CP_CONTIGUOUS = 1 };

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
} ao_layout;

typedef struct ao_tensors {
  const float *q, *k, *v, *w; /* v null for the indexer, w null for sdpa */
  int32_t* topk;
  float* scores;
  float *o, *lse;
} ao_tensors;

typedef uint32_t (*ao_plugin_abi_version_fn)(void);
typedef const char* (*ao_plugin_name_fn)(void);
typedef int (*ao_plugin_run_fn)(const ao_layout*, const ao_tensors*, const char* knobs, char* msg, size_t msg_len);
typedef int (*ao_plugin_unavailable_fn)(char* msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_ORACLE_PLUGIN_H */

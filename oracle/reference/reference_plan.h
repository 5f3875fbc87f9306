// Shared by the references: how check rows are grouped into blocks, and which keys a row reads
// (through the bound offsets, or through a bug model's wrong ones).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "attn_oracle/internal/omp_threads.h"
#include "attn_oracle/reference/reference.h"

namespace ao::detail {

struct RowBlock {
  int seg = 0;
  std::vector<int64_t> rows;  // Q rows, all of one segment
};

// Check rows grouped by segment, at most `max_rows` per block (deterministic).
inline std::vector<RowBlock> row_blocks(const Layout& l, size_t max_rows) {
  std::vector<RowBlock> out;
  for (int64_t r : l.check_rows) {
    const int seg = l.row_segment[size_t(r)];
    if (out.empty() || out.back().seg != seg || out.back().rows.size() >= max_rows) out.push_back({seg, {}});
    out.back().rows.push_back(r);
  }
  return out;
}

// A run of keys a row may attend: KV buffer rows base + [lo, hi).
struct KeyRange {
  int64_t base, lo, hi;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The SDPA band [lo, hi) of a row at position p of a document of kv keys for the window bounds
// (left, right) in the case's convention (layout.h: -1 = unbounded). as_number: a kernel that uses the
// sentinel -1 as a number (left -1: s >= p + 1 (fa) / s > p + 1 (cudnn); right -1: s <= p - 1).
inline void sdpa_band(const Layout& l, int64_t kv, int64_t p, int64_t left, int64_t right, bool as_number,
                      int64_t& lo, int64_t& hi) {
  const bool fa = l.c.window_convention == WindowConvention::Fa;
  hi = right < 0 && !as_number ? kv : std::clamp<int64_t>(p + 1 + right, 0, kv);
  lo = 0;
  if ((left < 0 && !as_number) || (left == 0 && !fa)) return;
  lo = std::clamp<int64_t>(fa ? p - left : p - left + 1, 0, hi);
}

// Window bug models: the bounds (window, window_right) as the kernel reads them; the band is
// recomputed only where a model changes them.
inline void window_quirks(const Layout& l, int64_t kv, int64_t p, const Quirks& qk, int64_t& lo, int64_t& hi) {
  const Case& c = l.c;
  if (c.op != Op::Sdpa || c.mask == MaskKind::None) return;
  int64_t left = c.window, right = c.window_right;
  if (qk.cp_drops_window && l.is_cp()) left = -1, right = 0;          // the band's mask dropped, is_causal set
  if (qk.window_left_only && right > 0) right = -1;                   // only the left bound forwarded
  if (qk.sentinel_widen && left + right < 0) left = right = -1;       // any negative sum read as "full"
  if (qk.clamp_right_before_shift && right > l.max_seqlen_kv) right = l.max_seqlen_kv;  // p already shifted
  const bool as_number = qk.sentinel_empty_band && (left == -1 || right == -1);
  if (left == c.window && right == c.window_right && !as_number) return;
  sdpa_band(l, kv, p, left, right, as_number, lo, hi);
}

// The key ranges a row reads, as the (possibly buggy) kernel addresses them; keys outside the
// KV buffer are dropped (a real kernel would read out of bounds; the CPU model must not), so a model
// re-creates the kernel's wrong answer without its memory error, and nothing is sized by a
// max_seqlen beyond what the buffer holds.
inline std::vector<KeyRange> row_key_ranges(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  const auto& d = l.docs[size_t(seg.doc)];
  int64_t p = qk.topleft_cp ? (r - seg.row0) : l.pos_of(r);
  if (qk.topleft_for_bottomright && l.c.mask == MaskKind::BottomRight && l.c.start_pos < 0)
    p = seg.tok0 + (r - seg.row0);  // the shift dropped, the CP chunk's token offset kept
  int64_t lo, hi;
  l.allowed_range(seg.doc, p, lo, hi);
  if (qk.off_by_one && l.c.mask != MaskKind::None && hi < d.kv_len) hi += 1;
  window_quirks(l, d.kv_len, p, qk, lo, hi);
  if (qk.decode_tile > 0 && l.c.mask == MaskKind::None && d.q_len == 1)
    hi = (d.kv_len + qk.decode_tile - 1) / qk.decode_tile * qk.decode_tile;
  // issue 15 (split): split-max-seqlen [29]: with num_splits > 1 the kernel takes the document's key
  // count from max_seqlen_kv: the bottom-right shift and the key bound use it instead of kv_len.
  if (qk.split_max_seqlen && l.c.num_splits > 1 && l.max_seqlen_kv > d.kv_len)
    l.allowed_range(seg.doc, l.c.mask == MaskKind::BottomRight ? p + l.max_seqlen_kv - d.kv_len : p, lo, hi,
                    l.max_seqlen_kv);
  auto base_of = [&](const DocLayout& x) {
    if (qk.derived_offsets) return x.packed_kv_off;
    if (qk.shared_qkv_offsets) return x.q_off;
    if (qk.batch_stride_max_seqlen) return int64_t(&x - l.docs.data()) * l.max_seqlen_kv;
    return x.kv_off;
  };
  // issue 15 (idx): the row's key start received wrong. Expressed on the document's base (lo < 0 reaches
  // earlier buffer rows) so that every row of a block keeps one base.
  const int64_t b0 = base_of(d);
  if (qk.chunk_keys_only) hi = std::min(hi, d.q_len / l.c.ratio);  // [9] only the current chunk's keys
  if (qk.row_start_ignored) lo = -b0;               // [1] from buffer row 0
  if (qk.long_row_keys > 0 && hi - lo > qk.long_row_keys) {  // [2] buffer rows [0, n)
    hi -= lo + b0;
    lo = -b0;
  }
  if (qk.start_align > 0) lo -= b0 % qk.start_align;  // [3] start aligned down
  std::vector<KeyRange> out;
  if (qk.cross_doc)
    for (int b = 0; b < seg.doc; ++b) out.push_back({base_of(l.docs[size_t(b)]), 0, l.docs[size_t(b)].kv_len});
  if (qk.cp_local_keys && l.is_cp()) {
    // One range per segment of this document on this rank: the keys its own tokens would produce
    // (key s from token s * ratio), as a kernel that never all-gathered K/V sees them.
    for (const auto& g : l.segments) {
      if (g.doc != seg.doc) continue;
      const int64_t a = std::max(lo, ceil_div(g.pos0, l.c.ratio));
      out.push_back({base_of(d), a, std::max(a, std::min(hi, ceil_div(g.pos0 + g.rows, l.c.ratio)))});
    }
  } else {
    out.push_back({base_of(d), lo, hi});
  }
  // Every range, empty ones included, ends up inside the buffer: 0 <= base + lo <= base + hi <= kv_rows
  // (a base past the buffer's end, as a capacity-derived stride gives, leaves an empty range at the end).
  for (auto& k : out) {
    k.hi = std::min(k.hi, l.kv_rows - k.base);
    k.lo = std::clamp(k.lo, -k.base, std::max(k.hi, -k.base));
    k.hi = std::max(k.hi, k.lo);
  }
  return out;
}

// Where a row's outputs go (Q row for the indexer's top-k, O row, stats row).
inline int64_t q_read_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if (qk.derived_offsets && !l.is_cp()) return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return r;
}
inline int64_t o_write_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if (qk.derived_offsets && !l.is_cp()) return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return seg.o_row0 + (r - seg.row0);
}
inline int64_t stats_write_row(const Layout& l, int64_t r, const Quirks& qk) {
  const auto& seg = l.seg_of(r);
  if ((qk.derived_offsets || qk.stats_packed) && !l.is_cp())
    return l.docs[size_t(seg.doc)].packed_q_off + (r - seg.row0);
  return seg.stats_row0 + (r - seg.row0);
}

// Threads of the references' row-block loops: OMP_NUM_THREADS when set (at most the CPUs), else the physical cores
// (hyperthread siblings share one core's FMA units, so they only add contention to a GEMM).
inline std::atomic<int>& reference_threads_override() {  // > 0: tests pin the thread count
  static std::atomic<int> n{0};
  return n;
}
inline int reference_threads() {
  if (const int o = reference_threads_override().load(); o > 0) return o;
  static const int n = [] {
    if (std::getenv("OMP_NUM_THREADS")) return omp_team_size();  // bounded by the CPUs (omp_threads.h)
    std::set<std::string> cores;
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < cpus; ++c) {
      const std::string t = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
      std::ifstream pkg(t + "physical_package_id"), core(t + "core_id");
      std::string p, k;
      if (!(pkg >> p) || !(core >> k)) return int(cpus);  // no topology: every CPU counts
      cores.insert(p + ":" + k);
    }
    return std::max(1, int(cores.size()));
  }();
  return n;
}

// A progress line on stderr for long runs, only when stderr is a terminal and the run is expected
// to take more than a couple of seconds (work units given by the caller, e.g. multiply-adds).
class Progress {
 public:
  Progress(const char* what, size_t total_blocks, double work, double work_per_second = 4e10)
      : what_(what), total_(total_blocks), on_(work / work_per_second > 2.0 && isatty(STDERR_FILENO)) {}
  ~Progress() {
    if (on_ && shown_) std::fprintf(stderr, "\r\033[K");
  }
  void block_done() {
    if (!on_) return;
    const size_t d = done_.fetch_add(1) + 1;
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (t - last_ < 0.5 && d != total_) return;
    last_ = t;
    shown_ = true;
    std::fprintf(stderr, "\r\033[K%s: %zu/%zu row blocks (%.0f%%), %.1f s", what_, d, total_,
                 100.0 * double(d) / double(total_), t);
    std::fflush(stderr);
  }

 private:
  const char* what_;
  size_t total_;
  bool on_, shown_ = false;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  double last_ = -1;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace ao::detail

// How the references run: their thread count (from OMP_NUM_THREADS or the CPU topology) and a progress
// line for long runs.
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

#include <omp.h>

#include "attn_oracle/internal/omp_threads.h"

namespace ao::detail {

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

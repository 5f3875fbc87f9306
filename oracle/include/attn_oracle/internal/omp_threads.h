// The size of every OpenMP team the core starts: OMP_NUM_THREADS (or OpenMP's default), at most the
// CPUs this process may run on. The core's loops are compute-bound, so a larger team only adds
// contention; and a team too large to create (OMP_NUM_THREADS=3000) would make libgomp end the process
// with exit status 1, which the CLI reserves for FAIL. A valid value is the user's choice, so it is
// bounded rather than rejected.
#pragma once
#include <sched.h>

#include <algorithm>
#include <thread>

#include <omp.h>

namespace ao {

// CPUs in this process's affinity mask (the hardware's count where the mask cannot be read).
inline int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// For `#pragma omp parallel ... num_threads(omp_team_size())`.
inline int omp_team_size() {
  static const int cpus = available_cpus();
  return std::clamp(omp_get_max_threads(), 1, cpus);
}

}  // namespace ao

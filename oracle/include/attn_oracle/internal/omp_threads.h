// The size of every OpenMP team the core starts: OMP_NUM_THREADS (or OpenMP's default), at most the
// CPUs this process may run on. The core's loops are compute-bound, so a larger team only adds
// contention; and a team too large to create (OMP_NUM_THREADS=3000) would make libgomp end the process
// with exit status 1, which the CLI reserves for FAIL. A valid value is the user's choice, so it is
// bounded rather than rejected.
#pragma once
#include <sched.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include <omp.h>

namespace ao {

// CPUs this process may run on: its affinity mask (the hardware's count where the mask cannot be read).
// Where OpenMP binds its threads (OMP_PROC_BIND, OMP_PLACES), the runtime has bound the initial thread to its
// first place before main, so the calling thread's mask is one place (a single CPU or core: every team
// would be one thread); the process's CPUs are then those of all its places.
inline int available_cpus() {
  if (omp_get_proc_bind() != omp_proc_bind_false) {
    std::set<int> ids;
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> v(size_t(std::max(0, omp_get_place_num_procs(p))));
      omp_get_place_proc_ids(p, v.data());
      ids.insert(v.begin(), v.end());
    }
    if (!ids.empty()) return int(ids.size());
  }
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

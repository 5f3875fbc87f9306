// Sizing a large tensor with its pages faulted in by the whole team. A std::vector writes its elements in
// the one thread that sizes it, and for a fresh tensor of hundreds of MiB most of that time is the kernel
// faulting in and clearing its pages one by one: 0.23 s per 512 MiB on this project's 2-core EPYC, where
// populating the same range from 2 threads (MADV_POPULATE_WRITE, Linux 5.14) and then writing it took
// 0.10 + 0.03 s. The write that sizes the vector stays serial (several tensors are sized side by side).
// The advice only maps pages the program owns (zero pages, as a first write would map them): the values
// are those the sizing writes in every case, and where the kernel refuses the advice the tensor is sized
// as before.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "attn_oracle/internal/omp_threads.h"

namespace ao {

// Below this a tensor is a few thousand pages at most: faulting them in one thread is not worth a team.
inline constexpr size_t kPrefaultMinBytes = size_t(16) << 20;

// Empties v and gives it storage for n elements; where that storage is large and new, the team has faulted
// its pages in. The caller then sizes v (assign, resize: from one thread, or several vectors side by side).
template <class T>
void reserve_prefaulted(std::vector<T>& v, size_t n) {
  v.clear();
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  const size_t bytes = n * sizeof(T);
  if (bytes >= kPrefaultMinBytes && v.capacity() < n) {
    std::vector<T>().swap(v);  // free the old storage first: the peak stays one tensor
    v.reserve(n);
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (uintptr_t(v.data()) + page - 1) & ~(page - 1);
    const uintptr_t end = (uintptr_t(v.data()) + bytes) & ~(page - 1);
    constexpr uintptr_t kSpan = uintptr_t(8) << 20;  // per task: 2048 pages
    const int64_t spans = end > begin ? int64_t((end - begin + kSpan - 1) / kSpan) : 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(std::clamp<int64_t>(spans, 1, omp_team_size())))
    for (int64_t s = 0; s < spans; ++s) {
      const uintptr_t a = begin + uintptr_t(s) * kSpan;
      (void)madvise(reinterpret_cast<void*>(a), std::min(kSpan, end - a), MADV_POPULATE_WRITE);  // advice only
    }
    return;
  }
#endif
  v.reserve(n);
}

// v.assign(n, value) on storage from reserve_prefaulted.
template <class T>
void assign_prefaulted(std::vector<T>& v, size_t n, T value) {
  reserve_prefaulted(v, n);
  v.assign(n, value);
}

}  // namespace ao

// Writing a whole buffer to a file descriptor. Inline and plain system calls only: the subprocess
// supervisor calls it in forks, and attn-oracle-plugin-host (a separate executable that links nothing
// of the core) uses the same one.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace ao {

// Writes all of `data` to fd (retrying short writes and EINTR); false on an error.
inline bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace ao

#include "attn_oracle/internal/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

namespace ao {

namespace fs = std::filesystem;

std::string SaveError::reason() const { return std::strerror(err); }

AtomicFile::AtomicFile(std::string path, std::string tmp) : path_(std::move(path)), tmp_(std::move(tmp)) {
  if (tmp_.empty()) {
    const fs::path p(path_);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    tmp_ = (dir / fmt::format(".{}.tmp.{}", p.filename().string(), ::getpid())).string();
  }
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), pending_(std::exchange(o.pending_, false)) {}

AtomicFile::~AtomicFile() {
  if (pending_) ::unlink(tmp_.c_str());
}

SaveError AtomicFile::write(std::string_view text) {
  auto fail = [&](const char* step, int err, size_t done = 0) {
    ::unlink(tmp_.c_str());
    pending_ = false;
    return SaveError{step, err, done, text.size()};
  };
  ::unlink(tmp_.c_str());  // a stale temporary of a crashed run with this pid
  pending_ = false;
  const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return SaveError{"create", errno, 0, text.size()};
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return fail("write", err, done);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("fsync", err, text.size());
  }
  if (::close(fd) != 0) return fail("close", errno, text.size());
  pending_ = true;
  return {};
}

SaveError AtomicFile::put_in_place() {
  if (!pending_) return SaveError{"rename", ENOENT};
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    pending_ = false;
    return SaveError{"rename", err};
  }
  pending_ = false;
  const fs::path p(path_);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
  return {};
}

void write_file_atomically(const std::string& path, std::string_view text) {
  AtomicFile f(path);
  SaveError e = f.write(text);
  if (!e) e = f.put_in_place();
  if (!e) return;
  const std::string what = e.step == "rename" ? "rename to " + path + ":" : e.step;
  throw std::runtime_error(fmt::format("cannot {} {}: {}", what, f.tmp(), e.reason()));
}

}  // namespace ao

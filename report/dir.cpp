#include "attn_oracle/report/dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "attn_oracle/internal/atomic_file.h"

namespace ao {

namespace fs = std::filesystem;

namespace {

constexpr const char* kReportFiles[] = {"report.json", "report.md", "report.xml", "report.html"};
constexpr const char* kLockName = ".attn-oracle.lock";
constexpr const char* kTmpPrefix = ".report-tmp-";

std::string read_holder(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, size_t(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown" : s;
}

// Why a report file was not written, in the words the error names each file with.
std::string save_failure(const SaveError& e) {
  if (e.step == "create") return fmt::format("cannot create it: {}", e.reason());
  if (e.step == "write") return fmt::format("write failed after {} of {} bytes: {}", e.done, e.size, e.reason());
  if (e.step == "rename") return fmt::format("cannot rename it into place: {}", e.reason());
  return fmt::format("write failed: {}", e.reason());  // fsync, close: the bytes may not be on disk
}

}  // namespace

ReportDir::ReportDir(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) throw ReportDirError("--report-dir: empty path (give a directory)");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw ReportDirError(fmt::format("--report-dir '{}': cannot create: {}", dir_, ec.message()));
  if (!fs::is_directory(dir_, ec)) throw ReportDirError(fmt::format("--report-dir '{}': not a directory", dir_));
  // Creating the lock file is the writability check (root ignores permission bits, access() would lie).
  const std::string lock = (fs::path(dir_) / kLockName).string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (lock_fd_ < 0)
    throw ReportDirError(fmt::format("--report-dir '{}': cannot write there: {}", dir_, std::strerror(errno)));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = read_holder(lock_fd_);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      throw ReportDirError(
          fmt::format("--report-dir '{}': in use by another attn-oracle run (pid {}); use another directory", dir_,
                      holder));
    throw ReportDirError(fmt::format("--report-dir '{}': cannot lock {}: {}", dir_, lock, std::strerror(err)));
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw ReportDirError(fmt::format("--report-dir '{}': cannot write there: {}", dir_, std::strerror(err)));
  }
  // Nothing of an earlier run may look current; leftovers of an interrupted write go too (we hold the lock).
  for (const char* f : kReportFiles) {
    fs::remove(fs::path(dir_) / f, ec);
    if (ec) throw ReportDirError(fmt::format("--report-dir '{}': cannot remove the old {}: {}", dir_, f, ec.message()));
  }
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind(kTmpPrefix, 0) == 0) fs::remove_all(it->path(), ec);
}

ReportDir::~ReportDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing the last descriptor releases the flock
}

void ReportDir::write(const std::vector<CaseResult>& results, const ReportStatus& status) {
  const fs::path tmp = fs::path(dir_) / fmt::format("{}{}", kTmpPrefix, ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) throw ReportDirError(fmt::format("--report-dir '{}': cannot create {}: {}", dir_, tmp.string(), ec.message()));
  // Each file on its own: one that cannot be made, written (EFBIG past RLIMIT_FSIZE, ENOSPC) or put in
  // place (a directory in its way) is reported and never costs the others.
  const std::pair<const char*, std::function<std::string()>> files[] = {
      {kReportFiles[0], [&] { return report_json(results, status, dir_); }},
      {kReportFiles[1], [&] { return report_markdown(results, status); }},
      {kReportFiles[2], [&] { return report_junit(results, status); }},
      {kReportFiles[3], [&] { return report_html(results); }},
  };
  std::vector<std::string> failed;
  std::vector<std::pair<const char*, AtomicFile>> written;
  for (const auto& [name, make] : files) {
    try {
      AtomicFile f((fs::path(dir_) / name).string(), (tmp / name).string());
      if (const SaveError e = f.write(make()))
        failed.push_back(fmt::format("{}: {}", name, save_failure(e)));
      else
        written.emplace_back(name, std::move(f));
    } catch (const std::exception& e) {  // the writer itself (out of memory)
      failed.push_back(fmt::format("{}: {}", name, e.what()));
    }
  }
  // Put in place only once all were written: the dir never shows a file of this run beside an older one.
  // What stands at a report's name now appeared during the run (open() cleared the names, under the lock):
  // a backend's directory or FIFO there is removed, so that it never costs the run its report.
  for (auto& [name, f] : written) {
    const fs::path target = fs::path(dir_) / name;
    const fs::file_status st = fs::symlink_status(target, ec);
    if (!ec && fs::exists(st) && !fs::is_regular_file(st)) fs::remove_all(target, ec);
    if (const SaveError e = f.put_in_place()) failed.push_back(fmt::format("{}: {}", name, save_failure(e)));
  }
  fs::remove_all(tmp, ec);
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : "; ") + f;
    throw ReportDirError(fmt::format("--report-dir '{}': {} of {} report files not written ({}); the others were",
                                     dir_, failed.size(), std::size(files), list));
  }
}

void write_report_files(const std::string& dir, const std::vector<CaseResult>& results, const ReportStatus& status) {
  ReportDir(dir).write(results, status);
}

}  // namespace ao

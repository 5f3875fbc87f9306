#include "attn_oracle/reports/report_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

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
  auto put = [&](const char* name, const std::string& text) {
    std::ofstream f(tmp / name, std::ios::binary);
    f << text;
    f.close();
    if (!f) {
      fs::remove_all(tmp, ec);
      throw ReportDirError(fmt::format("--report-dir '{}': cannot write {}", dir_, name));
    }
  };
  put(kReportFiles[0], report_json(results, status));
  put(kReportFiles[1], report_markdown(results, status));
  put(kReportFiles[2], report_junit(results, status));
  put(kReportFiles[3], report_html(results));
  for (const char* f : kReportFiles) {
    fs::rename(tmp / f, fs::path(dir_) / f, ec);
    if (ec) throw ReportDirError(fmt::format("--report-dir '{}': cannot rename {} into place: {}", dir_, f, ec.message()));
  }
  fs::remove_all(tmp, ec);
}

void write_report_files(const std::string& dir, const std::vector<CaseResult>& results, const ReportStatus& status) {
  ReportDir(dir).write(results, status);
}

}  // namespace ao

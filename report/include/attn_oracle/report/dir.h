// A report directory held by one run, so that what it holds is always one run's complete set:
//  * opened before any case runs: the dir is created if missing and must be a writable directory;
//    an empty path is refused (all ReportDirError, exit 2, naming the dir);
//  * locked: flock on <dir>/.attn-oracle.lock (non-blocking, the file holds the owner's pid); a second
//    run on the same dir is refused naming the holder's pid;
//  * the previous run's report files are removed on open, so an interrupted run never leaves an older
//    run's reports looking current;
//  * write() saves each file into a temporary dir inside it (AtomicFile, internal/atomic_file.h: written
//    whole and fsynced), then renames the ones written into place; a
//    file that cannot be written (EFBIG past RLIMIT_FSIZE, ENOSPC) or put in place (a directory where it
//    goes) never costs the others: they are written, then a ReportDirError names every file missed.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "attn_oracle/report/report.h"

namespace ao {

struct ReportDirError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ReportDir {
 public:
  explicit ReportDir(std::string dir);  // throws ReportDirError
  ~ReportDir();                         // releases the lock (the lock file stays)
  ReportDir(const ReportDir&) = delete;
  ReportDir& operator=(const ReportDir&) = delete;

  // report.json, report.md, report.xml, report.html; throws ReportDirError naming each file not written.
  void write(const std::vector<CaseResult>& results, const ReportStatus& status = {});
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace ao

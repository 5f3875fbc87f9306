// Saving a file so that a crash, a full disk or a second writer never leaves a part of it where a
// reader looks: the bytes go to a temporary first (created exclusively, a link there is not followed,
// written in full, fsynced), and only a temporary written whole is renamed over the target, after
// which the directory is fsynced so that the rename itself survives a crash. Found cases (one file,
// write_file_atomically) and report directories (several files written first, then put in place
// together) are saved through it.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ao {

// Why a step of a save failed: the step ("create", "write", "fsync", "close", "rename"), the errno
// value, and for "write" how many of how many bytes were written. Empty (false) when it did not fail.
struct SaveError {
  std::string step;
  int err = 0;
  size_t done = 0, size = 0;
  explicit operator bool() const { return !step.empty(); }
  std::string reason() const;  // strerror(err)
};

class AtomicFile {
 public:
  // The temporary: `tmp` when given, else ".<name>.tmp.<pid>" beside `path` (hidden and not *.case,
  // so no corpus walk or gate picks up one left by a crash).
  explicit AtomicFile(std::string path, std::string tmp = {});
  ~AtomicFile();  // removes a temporary not put in place
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;

  // Creates the temporary (a stale one of this name is removed first), writes all of `text`, fsyncs
  // and closes it. On failure the temporary is removed.
  SaveError write(std::string_view text);
  // Renames the written temporary over the path, then fsyncs the path's directory.
  SaveError put_in_place();

  const std::string& path() const { return path_; }
  const std::string& tmp() const { return tmp_; }

 private:
  std::string path_, tmp_;
  bool pending_ = false;  // a temporary written and not yet renamed
};

// One file saved whole: AtomicFile(path).write(text) then put_in_place(). Throws std::runtime_error
// "cannot <step> <temporary>: <why>" ("cannot rename to <path>: <temporary>: <why>").
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace ao

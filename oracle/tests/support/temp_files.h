// Test helper: scratch directories and reading a file whole.
//  * fresh_dir(name): <system temp>/ao-test-<name>-<pid>, emptied and created; the test removes it.
//  * TempDir: a new unique directory (mkdtemp), removed with everything in it when the object goes.
//  * slurp(path): a file's bytes ("" when it cannot be read).
#pragma once
#include <filesystem>
#include <string>

namespace ao::test {

std::filesystem::path fresh_dir(const std::string& name);

struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

std::string slurp(const std::filesystem::path& p);

}  // namespace ao::test

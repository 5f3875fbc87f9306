#include "temp_files.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ao::test {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ao-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TempDir::TempDir() {
  std::string t = (fs::temp_directory_path() / "ao-test-XXXXXX").string();
  if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp " + t + " failed");
  path = t;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ao::test

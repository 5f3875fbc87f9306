#include "attn_oracle/case_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace ao {

namespace fs = std::filesystem;

std::string case_text_of_line(const std::string& line) {
  std::string s = line.substr(0, line.find('#'));
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> collect_case_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".case") found.push_back(it->path().string());
      if (ec) throw CaseFileError(fmt::format("{}: cannot read directory: {}", p, ec.message()));
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.push_back(p);
    } else {
      throw CaseFileError(fmt::format("{}: no such case file or directory", p));
    }
  }
  return out;
}

std::vector<CaseEntry> read_case_files(const std::vector<std::string>& files, const LayoutLimits& lim) {
  std::vector<CaseEntry> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) throw CaseFileError(fmt::format("{}: cannot open", f));
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      const std::string text = case_text_of_line(n == 1 ? strip_utf8_bom(line) : line);
      if (text.empty()) continue;
      try {
        CaseEntry e{f, n, parse_case(text)};
        make_layout(e.c, lim, LayoutMode::Describe);  // validates without building per-row vectors
        out.push_back(std::move(e));
      } catch (const CaseError& err) {
        throw CaseFileError(fmt::format("{}:{}: {}", f, n, err.what()));
      }
    }
  }
  return out;
}

}  // namespace ao

#include "attn_oracle/fuzz/found_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/backends/backend_spec.h"

namespace ao {

namespace fs = std::filesystem;

std::string case_hash(const std::string& line) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : line) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::string found_file_path(const std::string& dir, const Case& c) {
  return (fs::path(dir) / (case_hash(print_case(c)) + ".case")).string();
}

std::string repro_note(int fails, int runs) {
  return fmt::format("reproduced {} of {} runs{}", fails, runs, fails < runs ? " (NONDETERMINISTIC)" : "");
}

namespace {

// The spec as a user re-runs it (normalize_backend_spec); as given when the registry does not know it.
std::string portable_spec(const std::string& spec) {
  try {
    return normalize_backend_spec(spec, SpecForm::Portable);
  } catch (const BadInput&) {
    return spec;
  }
}

// `# <tag>: <text>` lines among the first 64 of `file`; throws CaseFileError for a line too long.
std::map<std::string, std::string> header_comments(const std::string& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file, std::ios::binary);
  std::string line;
  for (int n = 1; n <= 64 && read_bounded_line(in, line, file, n); ++n) {
    if (line.rfind("# ", 0) != 0) continue;
    const size_t colon = line.find(": ", 2);
    if (colon == std::string::npos || colon == 2) continue;
    const std::string tag = line.substr(2, colon - 2);
    if (!std::all_of(tag.begin(), tag.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == ' '; })) continue;
    if (tag == "catches" || tag == "choices") continue;  // data, not comments (read_case_files reads them)
    out.emplace(tag, line.substr(colon + 2));
  }
  return out;
}

}  // namespace

std::string found_file_text(const CampaignOptions& opt, const FoundCase& f) {
  CaseFileWriter w;
  w.note("found by attn-oracle fuzz (shrunk regression)");
  w.comment("backend", fmt::format("{}   vs: {}", portable_spec(opt.backend), portable_spec(opt.vs)));
  w.comment("campaign", fmt::format("--seed {} --shard {}/{} --dims {}, case #{}", opt.seed, opt.shard, opt.shards,
                                    dims_name(opt.gen.dims), f.index));
  w.comment("original", print_case(f.original));
  w.comment("original failing", portable_paths_in_text(failing_summary(f.original_result.verdict)));
  w.comment("original reproduced", repro_note(f.repro_fails, f.repro_runs));
  if (f.shrunk_repro_runs == 0) {
    w.comment("not shrunk", "the failure is nondeterministic; shrinking would chase noise");
  } else {
    w.comment("shrunk", fmt::format("in {} steps ({} runs{}); shrunk failing: {}", f.steps, f.runs,
                                    shrink_stop_note(f.shrink_stop),
                                    portable_paths_in_text(failing_summary(f.shrunk_result.verdict))));
    w.comment("shrunk reproduced", repro_note(f.shrunk_repro_fails, f.shrunk_repro_runs));
  }
  if (f.nondeterministic()) w.comment("nondeterministic", "this case does not fail on every run of the backend");
  w.comment("signature", f.signature);
  if (f.choices) w.choices({opt.gen, *f.choices});
  w.case_line(f.shrunk);
  return w.text();
}

std::string FoundFile::signature() const {
  const auto it = comments.find("signature");
  return it == comments.end() ? std::string() : it->second;
}

bool valid_found_file(const std::string& path, const LayoutLimits& lim) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0 || ec) return false;
  try {
    return !read_case_files({path}, lim).empty();
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<FoundFile> read_found_file(const std::string& path, const LayoutLimits& lim) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0 || ec) return std::nullopt;
  try {
    std::vector<CaseEntry> entries = read_case_files({path}, lim);
    if (entries.empty()) return std::nullopt;
    return FoundFile{std::move(entries[0].c), std::move(entries[0].choices), header_comments(path)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::map<std::string, std::string> found_signatures(const std::string& dir, const LayoutLimits& lim) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".case" && it->is_regular_file(ec)) files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::string sig;
    try {
      const auto comments = header_comments(file);
      if (auto it = comments.find("signature"); it != comments.end()) sig = it->second;
    } catch (const CaseFileError&) {
      continue;  // not a valid found file: not known (a campaign rewrites it when it finds its case)
    }
    if (!sig.empty() && !out.count(sig) && valid_found_file(file, lim)) out[sig] = file;
  }
  return out;
}

}  // namespace ao

// Runs every bug model (bug_models()) and cpu-ref on the given cases, judges each and explains the
// failing ones, then runs the selftest's kill and diagnosis matrices; built with -fsanitize=address,
// undefined (oracle/tests/CMakeLists.txt), so a model that reads or writes outside a buffer, or
// sizes an allocation by a max_seqlen the layout does not hold, ends the run with the sanitizer's report.
// A model re-creates a kernel's wrong answer, never its memory error.
//
//   ao_model_sanitizer [--no-selftest] FILE...   FILE: case lines, '#' comments (corpus .case files)
// Exit 0: every run was clean; 1: a model errored, threw or wrote its inputs; 2: bad usage or a bad case.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/internal/bad_input.h"
#include "attn_oracle/pipeline/explain.h"
#include "attn_oracle/pipeline/selftest.h"

using namespace ao;

namespace {

// One case: cpu-ref and every model through one Trial; the first failing model is explained (which
// runs every model again, through explain's own guarded loop). Returns the number of broken runs.
int run_case(const std::string& line) {
  Trial t(parse_case(line));
  auto ref_be = make_backend("cpu-ref");
  const TrialRun ref = t.run(*ref_be);
  if (!ref.ok()) {
    std::printf("cpu-ref did not run on %s: %s\n", line.c_str(), ref.status.reason.c_str());
    return 1;
  }
  int broken = 0, ran = 0;
  bool explained = false;
  for (const auto& m : bug_models()) {
    auto be = make_bug_model_backend(m);
    if (!be->declines(t.layout()).empty()) continue;
    const TrialRun got = t.run(*be);
    ++ran;
    if (!got.ok()) {
      std::printf("  %s: %s\n", got.backend.c_str(), got.status.reason.c_str());
      ++broken;
      continue;
    }
    const Verdict v = t.judge(got, ref);
    if (v.kind == Verdict::Fail && !explained) {
      const Explanation e = explain_trial(t, got, ref);
      explained = true;
      for (const auto& s : e.skipped)
        if (s.find("threw") != std::string::npos || s.find("wrote its input") != std::string::npos) {
          std::printf("  explain: %s\n", s.c_str());
          ++broken;
        }
    }
  }
  std::printf("%s: %d models%s\n", line.c_str(), ran, explained ? ", explained" : "");
  return broken;
}

}  // namespace

int main(int argc, char** argv) {
  bool selftest = true;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-selftest")
      selftest = false;
    else
      files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: ao_model_sanitizer [--no-selftest] FILE...\n");
    return 2;
  }
  int broken = 0, cases = 0;
  try {
    for (const auto& f : files) {
      std::ifstream in(f);
      if (!in) {
        std::fprintf(stderr, "ao_model_sanitizer: cannot read %s\n", f.c_str());
        return 2;
      }
      for (std::string line; std::getline(in, line);) {
        const auto b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        broken += run_case(line.substr(b));
        ++cases;
      }
    }
    if (selftest) {
      const SelftestResult r = run_selftest(selftest_families());
      std::printf("selftest: %zu families x %zu models, %s\n", r.families.size(), r.models.size(),
                  r.ok() ? "ok" : "problems (the selftest_kill_matrix test judges them)");
    }
  } catch (const CaseError& e) {
    std::fprintf(stderr, "ao_model_sanitizer: %s\n", e.what());
    return 2;
  }
  std::printf("%d cases, %d broken model runs\n", cases, broken);
  return broken ? 1 : 0;
}

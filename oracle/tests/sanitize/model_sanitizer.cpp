// Runs every bug model (bug_models()) and cpu-ref on the given cases, judges each and explains the
// failing ones, then runs the selftest's kill and diagnosis matrices; built with -fsanitize=address,
// undefined (oracle/tests/CMakeLists.txt), so a model that reads or writes outside a buffer, or
// sizes an allocation by a max_seqlen the layout does not hold, ends the run with the sanitizer's report.
// A model re-creates a kernel's wrong answer, never its memory error.
//
//   ao_model_sanitizer [--claims] [--no-selftest] FILE...   FILE: case lines, '#' comments (corpus .case files)
// The sweep (no --claims): every model on every case of every FILE, then both matrices (CTest
// model_sanitizer_sweep, label long: tens of minutes). --claims, the part the default test run keeps
// (CTest model_sanitizer): a FILE with a `# catches: cpu-bug:<model>` line runs only the models it names, a
// FILE without one (the addressing cases of model_cases.txt) every model; then every model on its own
// trigger and outside cases (bug_models(), first seed) and no matrices. Every model runs under the
// sanitizers on the cases that exercise its seam, in a fraction of the sweep's time.
// Exit 0: every run was clean; 1: a model errored, threw or wrote its inputs; 2: bad usage or a bad case.
#include <algorithm>
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

// One case: cpu-ref and every model of `only` (empty: every model) through one Trial; with every model,
// the first failing one is explained (which runs every model again, through explain's own guarded loop;
// with `only`, explaining would multiply a one-model case by the number of models). Returns the number of
// broken runs.
int run_case(const std::string& line, const std::vector<std::string>& only = {}) {
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
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
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
    if (v.kind == Verdict::Fail && !explained && only.empty()) {
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

// The models a case file claims (`# catches: cpu-bug:<model>` lines); empty: none claimed.
std::vector<std::string> claimed_models(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  const std::string tag = "# catches: cpu-bug:";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(tag, 0) == 0) {
      std::string name = line.substr(tag.size());
      name.erase(name.find_last_not_of(" \t\r") + 1);
      out.push_back(name);
    }
  return out;
}

// Every model on its own trigger and outside cases (the ordinary ones, first seed).
int run_model_cases(int& cases) {
  int broken = 0;
  for (const auto& m : bug_models()) {
    std::vector<std::string> lines;
    for (const auto& t : m.triggers)
      if (t.scale == CaseScale::Ordinary) lines.push_back(t.line);
    for (const auto& o : m.outside)
      if (o.scale == CaseScale::Ordinary) lines.push_back(o.line);
    for (const auto& l : lines) {
      broken += run_case(fmt::format("{} seed={}", l, kModelCaseSeeds[0]), {m.name});
      ++cases;
    }
  }
  return broken;
}

int main(int argc, char** argv) {
  bool selftest = true, claims = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-selftest")
      selftest = false;
    else if (a == "--claims")
      claims = true;
    else
      files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: ao_model_sanitizer [--claims] [--no-selftest] FILE...\n");
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
      const std::vector<std::string> only = claims ? claimed_models(f) : std::vector<std::string>{};
      for (std::string line; std::getline(in, line);) {
        const auto b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        broken += run_case(line.substr(b), only);
        ++cases;
      }
    }
    if (claims) broken += run_model_cases(cases);
    if (selftest && !claims) {
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

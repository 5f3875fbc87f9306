// `attn-oracle gate <files|dirs> --backend B`: the CI regression gate. Every case line of the corpus is
// parsed and validated first (a bad line: `file:line: ...`, exit 2, nothing run), then replayed on
// each backend vs the reference. Exit 0 only if no case that ran failed; skipped cases are listed
// and, with --require-run, fail the gate; weak cases (a gate that an all-zero answer passes:
// discrimination.h) are listed and counted apart and, with --strict, fail the gate; 125 if nothing ran. Reports via --report-dir (checked
// and locked before any case runs). A `# catches: B` claim whose case passes on B fails the gate.
// SIGINT/SIGTERM/SIGHUP: stops after the case in flight, writes an interrupted report, exits 128 + signal.
// A closed stdout (`gate ... | head -1`) stops it the same way (SIGPIPE, exit 141, the summary on stderr).
// A report file that cannot be written is named on stderr and makes the exit 2; the summary still prints.
// Each failing case is explained (explain.h: the bug models that reproduce it) unless --no-explain.
#include <csignal>
#include <iostream>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/verdict/claim.h"
#include "attn_oracle/verdict/verdict.h"
#include "commands.h"
#include "attn_oracle/report/dir.h"

namespace ao {
namespace {

struct GateArgs {
  std::vector<std::string> paths, backends;
  std::string vs = "cpu-ref", report_dir;
  bool report_dir_given = false, require_run = false, strict = false, quiet = false, no_explain = false;
};

// `# catches: <backend>` claims, each checked to name a backend that exists; key: the claim text.
// Value: the claimed backend's identity (normalize_backend_spec, SpecForm::Identity), which is compared
// with the identity of each backend the gate runs: spellings of one backend match.
std::map<std::string, std::string> claimed_names(const std::vector<CaseEntry>& entries) {
  std::map<std::string, std::string> names;
  for (const auto& e : entries) {
    if (e.claim.empty() || names.count(e.claim)) continue;
    try {
      backend_name(e.claim);  // checks the claim names a backend; runs no plugin library
      names[e.claim] = normalize_backend_spec(e.claim, SpecForm::Identity);
    } catch (const BadInput& err) {
      throw CaseFileError(fmt::format("{}:{}: '# catches: {}': {}", e.file, e.claim_line, e.claim, err.what()));
    }
  }
  return names;
}

int run_gate(const GateArgs& a, const LayoutLimits& lim) {
  install_interrupt_handlers();
  std::vector<CaseEntry> entries;
  std::map<std::string, std::string> claims;
  try {
    entries = read_case_files(collect_case_files(a.paths), lim);
    claims = claimed_names(entries);
  } catch (const CaseFileError& e) {
    std::cerr << "attn-oracle gate: " << e.what() << "\n";
    return 2;
  }
  if (entries.empty()) {
    std::cerr << "attn-oracle gate: no cases found in the given files\n";
    return 2;
  }
  // The report dir is checked and locked before any case runs, not found unwritable at the end.
  std::unique_ptr<ReportDir> report;
  try {
    if (a.report_dir_given) report = std::make_unique<ReportDir>(a.report_dir);
  } catch (const ReportDirError& e) {
    std::cerr << "attn-oracle gate: " << e.what() << "\n";
    return 2;
  }
  auto vs = make_backend(a.vs);
  std::vector<CaseResult> results;
  std::vector<std::string> where;
  VerdictTally n;
  int claims_checked = 0, claims_not_held = 0;
  for (const auto& spec : a.backends) {
    if (interrupted()) break;
    auto be = make_backend(spec);
    const std::string name = normalize_backend_spec(spec, SpecForm::Identity);
    for (const auto& e : entries) {
      if (interrupted()) break;  // stop between cases: the one in flight has finished
      CaseResult ran = run_case(e.c, *be, *vs, lim, report != nullptr, !a.no_explain);  // artifacts: report.html
      std::optional<CatchesClaim> claim;
      if (!e.claim.empty()) claim = CatchesClaim{e.claim, claims.at(e.claim), e.file, e.claim_line};
      ClaimedVerdict cv = apply_claim(std::move(ran.verdict), claim ? &*claim : nullptr, name);
      ran.verdict = std::move(cv.verdict);
      claims_checked += cv.check != ClaimCheck::NotChecked;
      claims_not_held += cv.check == ClaimCheck::NotHeld;
      results.push_back(std::move(ran));
      where.push_back(fmt::format("{}:{}", e.file, e.line));
      const CaseResult& r = results.back();
      n.add(r.verdict.kind);
      const std::string v = verdict_label(r.verdict.kind);
      if (!a.quiet || r.verdict.kind != Verdict::Pass)  // flushed: printed lines survive an interruption
        std::cout << fmt::format("{:<7} {}  [{}]  {:.2f}s  {}{}\n", v, where.back(), spec,
                                 r.backend_seconds + r.ref_seconds, r.case_line,
                                 r.verdict.reason.empty() ? "" : "  (" + r.verdict.reason + ")")
                  << (r.explanation ? "        explain: " + r.explanation->headline() + "\n" : "") << std::flush;
    }
  }
  const int sig = interrupted();
  int report_error = 0;
  if (report) {
    try {
      report->write(results, {sig});
    } catch (const ReportDirError& e) {
      std::cerr << "attn-oracle gate: " << e.what() << "\n";
      report_error = 2;
    }
  }
  const int64_t passed = n[Verdict::Pass], failed = n.bad(), skipped = n[Verdict::Skipped], weak = n.weak();
  if (weak > 0) {
    std::cout << fmt::format("weak ({}{}): a gate of the case cannot reject an all-zero or NaN answer\n", weak,
                             a.strict ? ", --strict: they fail the gate" : "");
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].verdict.kind == Verdict::Weak)
        std::cout << fmt::format("  {}  [{}]  {}\n", where[i], results[i].backend, results[i].verdict.reason);
  }
  if (skipped > 0) {
    std::cout << fmt::format("skipped ({}{}):\n", skipped, a.require_run ? ", --require-run: they fail the gate" : "");
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].verdict.kind == Verdict::Skipped)
        std::cout << fmt::format("  {}  [{}]  {}\n", where[i], results[i].backend, results[i].verdict.reason);
  }
  const std::string claim_note =
      claims_checked == 0 ? "" : fmt::format(", {} of {} claims held", claims_checked - claims_not_held, claims_checked);
  if (sig) {
    const std::string summary =
        fmt::format("gate: INTERRUPTED by {} after {} of {} case runs: {} passed, {} failed, {} weak, {} skipped{}\n",
                    signal_name(sig), results.size(), entries.size() * a.backends.size(), passed, failed, weak, skipped,
                    claim_note);
    (sig == SIGPIPE ? std::cerr : std::cout) << summary << std::flush;  // SIGPIPE: stdout is gone
    return 128 + sig;
  }
  const int code = a.require_run && skipped > 0 ? 1 : n.exit_code(a.strict);
  std::cout << fmt::format("gate: {} cases x {} backend(s): {} passed, {} failed, {} weak, {} skipped{} -> {}\n",
                           entries.size(), a.backends.size(), passed, failed, weak, skipped, claim_note,
                           code == 0 ? "PASS" : code == 125 ? "NOTHING RAN" : "FAIL")
            << std::flush;
  return report_error ? report_error : code;
}

const CommandRegistrar reg([](CLI::App& app, const LayoutLimits& lim) {
  auto a = std::make_shared<GateArgs>();
  auto* sub = app.add_subcommand("gate", "replay corpus files/directories (*.case); exit 0 only if all passed");
  sub->add_option("paths", a->paths, "case files or directories (searched recursively for *.case)")->required();
  sub->add_option("--backend,-b", a->backends, "backend(s) under test (repeatable)")->required();
  sub->add_option("--vs", a->vs, "reference backend")->capture_default_str();
  auto* rd = sub->add_option("--report-dir", a->report_dir, "write report.json / report.md / report.xml here");
  sub->add_flag("--require-run", a->require_run, "skipped cases fail the gate");
  sub->add_flag("--strict", a->strict,
                "weak cases fail the gate (a gate that an all-zero or NaN answer of an output passes)");
  sub->add_flag("--quiet,-q", a->quiet, "print only cases that did not pass");
  sub->add_flag("--no-explain", a->no_explain,
                "do not explain failing cases (explain runs every bug model on each; for big gates)");
  return AppCommand{sub, [a, rd, &lim] {
                      a->report_dir_given = rd->count() > 0;
                      return run_gate(*a, lim);
                    }};
});

}  // namespace
}  // namespace ao

#include "attn_oracle/fuzz/campaign.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/backends/backend_spec.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/shrink_failure.h"
#include "attn_oracle/internal/atomic_file.h"
#include "attn_oracle/internal/bad_input.h"
#include "attn_oracle/internal/interrupt.h"

namespace ao {

namespace fs = std::filesystem;

namespace {

// An exclusive lock on the output directory itself (flock on its descriptor: no lock file among the
// cases, and released when its holder ends, however it ends). A directory that cannot be opened holds
// no lock; the save that follows fails and says why.
struct DirLock {
  int fd = -1;
  explicit DirLock(const std::string& dir) {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~DirLock() {
    if (fd >= 0) ::close(fd);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
};

// The file's bytes, or nullopt when it cannot be read.
std::optional<std::string> file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The layout of a failing run (CaseResult::layout, kept for FAIL and ERROR verdicts).
std::shared_ptr<const Layout> failing_layout(const CaseResult& r) {
  if (!r.layout) throw std::logic_error("fuzz: a failing result without its layout: " + r.case_line);
  return r.layout;
}

}  // namespace

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const std::shared_ptr<Backend> backend = opt.backend_object ? opt.backend_object : make_backend(opt.backend);
  auto vs = make_backend(opt.vs);
  const std::string backend_id =
      opt.backend_object ? opt.backend : normalize_backend_spec(opt.backend, SpecForm::Portable);
  CampaignSummary s;
  // A backend that goes unavailable mid-campaign (an in-process GPU library whose CUDA context was lost:
  // every later CUDA call of the process fails) would turn each later run into a skip and each shrink
  // step into noise, and a shrunk "failure" of a dead context into a corpus file: the campaign ends at the
  // case that saw it go, names it, and keeps nothing shrunk after the loss.
  const bool backend_up = backend->unavailable_reason().empty(), vs_up = vs->unavailable_reason().empty();
  auto lost = [&]() -> std::string {
    if (backend_up)
      if (std::string why = backend->unavailable_reason(); !why.empty()) return why;
    if (vs_up)
      if (std::string why = vs->unavailable_reason(); !why.empty()) return "--vs " + why;
    return {};
  };
  std::map<std::string, size_t> by_signature;  // -> index into s.unique
  std::map<std::string, std::string> known;    // signature -> file that existed before the campaign
  if (!opt.out_dir.empty()) {  // a folder that cannot take the found files is refused before any case runs
    std::error_code ec;
    fs::create_directories(opt.out_dir, ec);
    std::string why = ec ? ec.message() : "";
    if (why.empty() && !fs::is_directory(opt.out_dir, ec)) why = "not a directory";
    if (why.empty() && ::access(opt.out_dir.c_str(), W_OK | X_OK) != 0) why = std::strerror(errno);
    if (!why.empty()) throw BadInput("out", opt.out_dir, "cannot hold found files: " + why);
    known = found_signatures(opt.out_dir, opt.lim);
  }
  ShrinkOptions so;
  so.max_runs = opt.shrink_runs;
  so.lim = opt.lim;
  if (opt.budget.seconds > 0)
    so.deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(opt.budget.seconds));
  std::map<std::string, std::string> ours;  // file this campaign wrote -> its text
  // Points f.file at a valid file for f: one known before the campaign, or f's own, written now. Called
  // under the DirLock; a failure to write is recorded in f.save_error and printed with the case line.
  auto save = [&](FoundCase& f) {
    if (opt.out_dir.empty()) return;
    f.save_error.clear();
    const std::string key = escape_comment_text(f.signature);  // as its `# signature:` line holds it
    try {
      if (auto it = known.find(key); it != known.end()) {
        if (valid_found_file(it->second, opt.lim)) {
          f.file = it->second;
          f.already_known = true;
          return;
        }
        known.erase(it);
      }
      // Another campaign sharing the directory (a shard, a pytest-xdist worker) may have saved this signature
      // since this one started, or replaced the file known then: its file stands for this signature, so
      // the signature is saved once across the processes sharing the directory.
      for (const auto& [sig, file] : found_signatures(opt.out_dir, opt.lim))
        if (sig == key && !ours.count(file)) {
          known[sig] = f.file = file;
          f.already_known = true;
          return;
        }
      f.already_known = false;
      f.file = found_file_path(opt.out_dir, f.shrunk);
      std::error_code ec;
      if (!ours.count(f.file) && valid_found_file(f.file, opt.lim)) {
        f.already_known = true;
        return;
      }
      f.resaved = !ours.count(f.file) && fs::exists(fs::symlink_status(f.file, ec));
      const std::string text = found_file_text(opt, f);
      write_file_atomically(f.file, text);
      ours[f.file] = text;
    } catch (const std::exception& e) {
      f.save_error = e.what();
      f.file.clear();
      f.already_known = f.resaved = false;
      err << fmt::format("{}attn-oracle fuzz: case #{} NOT SAVED in {}: {}\n  its shrunk line: {}\n",
                         opt.progress ? "\n" : "", f.index, opt.out_dir, f.save_error, print_case(f.shrunk))
          << std::flush;
    }
  };
  // Removes a file this campaign wrote and no other has rewritten since (under the DirLock).
  auto drop_own = [&](const std::string& file) {
    auto it = ours.find(file);
    if (it == ours.end()) return;
    if (file_text(file) == it->second) fs::remove(file);
    ours.erase(it);
  };
  // Re-runs a failing case up to `runs` times (none after the deadline or a stop request): {runs that
  // failed like `r`, runs made}. A run cut short by a stop request proves nothing and is not counted.
  auto reproductions = [&](const Case& c, const CaseResult& r, int runs) {
    const StillFails again = fails_like(r, *backend, *vs, opt.lim);
    std::pair<int, int> n{0, 0};
    while (n.second < runs && !interrupted() && !(opt.budget.seconds > 0 && elapsed() >= opt.budget.seconds)) {
      const double t = elapsed();
      const bool failed = again(c);
      s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t);
      if (interrupted()) break;
      n.first += failed ? 1 : 0;
      ++n.second;
    }
    return n;
  };
  double last_progress = -1;
  for (uint64_t k = 0;; ++k) {
    if ((s.interrupted = interrupted()) != 0) break;
    if (opt.budget.cases > 0 && s.cases >= opt.budget.cases) break;
    if (opt.budget.seconds > 0 && elapsed() >= opt.budget.seconds) break;
    if (opt.max_failures > 0 && s.verdicts.bad() >= opt.max_failures) break;
    const uint64_t index = uint64_t(opt.shard) + k * uint64_t(opt.shards);
    GeneratedCase g;
    // The trial of the case that runs: made by the discrimination check of each draw (a weak draw is
    // replaced), its prepared comparator then judges the run.
    std::unique_ptr<Trial> trial;
    double inputs_seconds = 0;
    int redraws = 0;
    try {
      g = generate_discriminating(opt.seed, index, opt.gen, [&](const Case& c) {
        const double t = elapsed();
        trial.reset();
        trial = std::make_unique<Trial>(c, opt.lim);
        inputs_seconds = elapsed() - t;
        const std::vector<GateCheck>* checks = trial->gate_checks();
        return checks && std::any_of(checks->begin(), checks->end(), [](const GateCheck& x) { return x.weak(); });
      }, &redraws);
    } catch (const BadInput& e) {
      ++s.cases;
      ++s.invalid;
      s.invalid_lines.push_back(fmt::format("case #{}: generator produced an invalid case: {}", index, e.what()));
      continue;
    }
    s.weak_redrawn += uint64_t(redraws);
    const double t_run = elapsed();
    CaseResult r = run_trial(*trial, *backend, *vs);
    r.inputs_seconds = inputs_seconds;
    s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t_run + inputs_seconds);
    if ((s.interrupted = interrupted()) != 0) break;  // a run cut short proves nothing: not counted
    ++s.cases;
    s.verdicts.add(r.verdict.kind);
    const bool bad = r.verdict.kind == Verdict::Fail || r.verdict.kind == Verdict::Error;
    if (bad) {
      s.failing_indices.push_back(index);
      if (s.first_failure_case < 0) {
        s.first_failure_case = int64_t(k + 1);
        s.first_failure_seconds = elapsed();
      }
    }
    if (std::string why = lost(); !why.empty()) {
      s.backend_lost = fmt::format("at case #{} ({}): {}", index, print_case(g.c), why);
      break;
    }
    if (bad) {
      const double ts = elapsed();
      FoundCase f;
      f.index = index;
      f.original = g.c;
      f.original_result = r;
      f.shrunk_result = r;
      const auto [again, reruns] = reproductions(g.c, r, opt.confirm_runs);
      f.repro_fails = 1 + again;
      f.repro_runs = 1 + reruns;
      if ((s.interrupted = interrupted()) != 0) break;  // re-runs cut short prove nothing
      if (f.repro_fails < f.repro_runs) {
        // A flaky failure is kept as it was generated: a shrinker steered by it would keep whatever
        // candidate happened to fail and present noise as a minimal case.
        f.shrunk = g.c;
        f.choices = g.choices;
        f.signature = failure_signature(backend_id, *failing_layout(r), r.verdict);
      } else {
        // The layout of each case the shrinkers saw fail, by its line: the signature describes the case
        // kept from the trial that ran it.
        std::map<std::string, std::shared_ptr<const Layout>> failed_layouts{{r.case_line, failing_layout(r)}};
        const StillFails fails = fails_like(r, *backend, *vs, opt.lim, &f.shrunk_result);
        const ShrunkFailure sf = shrink_failure(g, opt.gen, [&](const Case& cand) {
          const double t = elapsed();
          const bool still = fails(cand);
          s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t);
          if (still) failed_layouts[f.shrunk_result.case_line] = failing_layout(f.shrunk_result);
          return still;
        }, so);
        f.shrunk = sf.minimal;
        f.choices = sf.choices;
        f.steps = sf.steps;
        f.runs = sf.runs;
        f.shrink_stop = sf.stop;
        f.signature = failure_signature(backend_id, *failed_layouts.at(print_case(sf.minimal)), f.shrunk_result.verdict);
        // The shrunk case is confirmed like the original: a case the shrinker kept on one lucky failure
        // is marked, not passed off as a deterministic regression.
        const auto [shrunk_again, shrunk_reruns] = reproductions(sf.minimal, r, opt.confirm_runs);
        f.shrunk_repro_fails = 1 + shrunk_again;
        f.shrunk_repro_runs = 1 + shrunk_reruns;
        // A stop request during the shrink or its confirmation ends the campaign after this failure is
        // kept: it failed on every confirming run, and the shrinker kept the smallest case that failed.
        s.interrupted = interrupted();
      }
      s.shrink_seconds += elapsed() - ts;
      if (std::string why = lost(); !why.empty()) {
        s.backend_lost = fmt::format("while confirming or shrinking case #{} ({}): {}", index, print_case(g.c), why);
        break;
      }
      if (auto it = by_signature.find(f.signature); it == by_signature.end()) {
        if (!opt.out_dir.empty()) {
          DirLock lock(opt.out_dir);  // shards sharing --out: the check and the write are one step
          save(f);
        }
        by_signature[f.signature] = s.unique.size();
        s.unique.push_back(std::move(f));
      } else {
        FoundCase& kept = s.unique[it->second];
        // A smaller case of the signature replaces the one this campaign wrote; a file that existed
        // before the campaign is never replaced (the corpus only grows). A deterministic case replaces a
        // nondeterministic one whatever its size.
        const bool better = kept.nondeterministic() != f.nondeterministic()
                                ? kept.nondeterministic()
                                : smaller_case(f.shrunk, kept.shrunk);
        if (!kept.already_known && better) {
          const std::string old_file = kept.file;
          f.merged = kept.merged + 1;
          if (!opt.out_dir.empty()) {
            DirLock lock(opt.out_dir);
            save(f);
            if (!old_file.empty() && old_file != f.file && !kept.resaved) drop_own(old_file);
          }
          kept = std::move(f);
        } else {
          ++kept.merged;
        }
      }
    }
    if (s.interrupted != 0) break;
    if (opt.progress && elapsed() - last_progress >= 0.25) {
      last_progress = elapsed();
      err << fmt::format("\r[fuzz] {} cases  {} passed  {} failed ({} unique)  {} weak  {} skipped  {:.0f} cases/s  {:.0f}s",
                         s.cases, s.verdicts[Verdict::Pass], s.verdicts.bad(), s.unique.size(), s.verdicts.weak(),
                         s.verdicts[Verdict::Skipped],
                         double(s.cases) / std::max(last_progress, 1e-9), last_progress)
          << std::flush;
    }
  }
  // Every file the summary names exists now: a shard sharing --out may have replaced a file this
  // campaign took as known; then this campaign's own case is written after all.
  if (!opt.out_dir.empty() && !s.unique.empty()) {
    DirLock lock(opt.out_dir);
    for (auto& f : s.unique)
      if (!f.file.empty() && !valid_found_file(f.file, opt.lim)) {
        if (!f.already_known) ours.erase(f.file);
        f.file.clear();
        save(f);
      }
  }
  for (const auto& f : s.unique) {
    s.nondeterministic += f.nondeterministic() ? 1 : 0;
    s.unsaved += f.save_error.empty() ? 0 : 1;
  }
  s.seconds = elapsed();
  if (opt.progress) err << "\n";
  return s;
}

SavedFound save_found_text(const std::string& dir, const std::string& text, const LayoutLimits& lim) {
  fs::create_directories(dir);
  DirLock lock(dir);
  // Read back as any found file is, from a name no reader of the directory takes for a case file.
  const std::string incoming = (fs::path(dir) / (".incoming-" + case_hash(text) + ".tmp")).string();
  write_file_atomically(incoming, text);
  struct Remove {
    std::string path;
    ~Remove() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_incoming{incoming};
  const std::optional<FoundFile> ff = read_found_file(incoming, lim);
  if (!ff || ff->signature().empty())
    throw BadInput("found file", text.substr(0, 120), "not a valid found file with a '# signature:' line");
  for (const auto& [sig, file] : found_signatures(dir, lim))
    if (sig == ff->signature()) return {file, true};
  const std::string path = found_file_path(dir, ff->c);
  if (valid_found_file(path, lim)) return {path, true};
  write_file_atomically(path, text);
  return {path, false};
}

std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s) {
  std::string out = fmt::format(
      "fuzz summary: backend {} vs {}, seed {}, shard {}/{}, dims {}\n"
      "  {} cases in {:.1f} s ({:.0f} cases/s): {} passed, {} failed, {} weak, {} skipped, {} invalid (generator bugs)\n"
      "  {} drawn case(s) redrawn for a weak gate (an all-zero or NaN answer of an output would have passed)\n",
      escape_comment_text(opt.backend), escape_comment_text(opt.vs), opt.seed, opt.shard, opt.shards,
      dims_name(opt.gen.dims),
      s.cases, s.seconds, double(s.cases) / std::max(s.seconds, 1e-9), s.verdicts[Verdict::Pass], s.verdicts.bad(),
      s.verdicts.weak(), s.verdicts[Verdict::Skipped], s.invalid, s.weak_redrawn);
  if (s.interrupted != 0)
    out += fmt::format("  INTERRUPTED by signal {}: the counts cover the cases that finished\n", s.interrupted);
  if (!s.backend_lost.empty())
    out += fmt::format("  BACKEND LOST {}\n  the campaign stopped there: no later run of this process would run the "
                       "kernel; run that case alone, in a fresh process\n",
                       escape_comment_text(s.backend_lost));
  for (const auto& l : s.invalid_lines) out += "  INVALID " + l + "\n";
  if (s.nondeterministic > 0)
    out += fmt::format("  NONDETERMINISTIC: {} of {} unique case(s) did not fail on every run of the backend "
                       "(--confirm-runs {}); see 'reproduced' below\n",
                       s.nondeterministic, s.unique.size(), opt.confirm_runs);
  if (s.unsaved > 0)
    out += fmt::format("  NOT SAVED: {} case(s) could not be written to {} (each is printed below with its line)\n",
                       s.unsaved, opt.out_dir);
  if (s.first_failure_case >= 0)
    out += fmt::format("  first failure: case {} of this shard after {:.3f} s; shrinking took {:.1f} s in all\n",
                       s.first_failure_case, s.first_failure_seconds, s.shrink_seconds);
  if (opt.budget.seconds > 0)
    out += fmt::format("  time budget {:g} s: no run starts after it; the longest single run took {:.3f} s\n",
                       opt.budget.seconds, s.longest_run_seconds);
  uint64_t merged = 0;
  std::string per_case;
  for (const auto& f : s.unique) {
    const std::string how = f.shrunk_repro_runs == 0
                                ? std::string("not shrunk (nondeterministic)")
                                : fmt::format("shrunk ({} steps, {} runs{})", f.steps, f.runs, shrink_stop_note(f.shrink_stop));
    out += fmt::format("  FAIL case #{}: {}\n    {}: {}\n    failing: {}\n", f.index, print_case(f.original), how,
                       print_case(f.shrunk),
                       failing_summary(f.shrunk_result.verdict));
    out += fmt::format("    original {}{}\n", repro_note(f.repro_fails, f.repro_runs),
                       f.shrunk_repro_runs == 0 ? "; not shrunk (a nondeterministic failure)"
                                                : "; shrunk " + repro_note(f.shrunk_repro_fails, f.shrunk_repro_runs));
    out += fmt::format("    signature: {}\n", f.signature);
    if (f.merged > 0) out += fmt::format("    merged: {} more failing case(s) with this signature\n", f.merged);
    if (!f.save_error.empty())
      out += fmt::format("    NOT SAVED ({}): the shrunk line above is the case\n", f.save_error);
    if (!f.file.empty())
      out += fmt::format("    {} {}\n",
                         f.already_known ? "known:" : f.resaved ? "rewrote (was empty or unparsable):" : "wrote:",
                         f.file);
    merged += f.merged;
    per_case += fmt::format("{}{}", per_case.empty() ? "" : ",", f.merged);
  }
  out += fmt::format("fuzz-result cases={} failed={} unique={} merged={} merged_per_case={} skipped={} invalid={} "
                     "first_failure_case={} first_failure_seconds={:.3f} seconds={:.3f} longest_run_seconds={:.3f} "
                     "interrupted={} nondeterministic={} unsaved={} backend_lost={} weak={} weak_redrawn={}\n",
                     s.cases, s.verdicts.bad(), s.unique.size(), merged, per_case.empty() ? "-" : per_case,
                     s.verdicts[Verdict::Skipped],
                     s.invalid, s.first_failure_case, s.first_failure_seconds, s.seconds, s.longest_run_seconds,
                     s.interrupted, s.nondeterministic, s.unsaved, s.backend_lost.empty() ? 0 : 1, s.verdicts.weak(),
                     s.weak_redrawn);
  return out;
}

int campaign_exit_code(const CampaignSummary& s) {
  // A generator bug fails the campaign too, and so does a backend lost mid-campaign.
  return s.invalid > 0 || !s.backend_lost.empty() ? 1 : s.verdicts.exit_code();
}

}  // namespace ao

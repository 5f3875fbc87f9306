#include "attn_oracle/campaign.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "attn_oracle/shrink.h"

namespace ao {

namespace fs = std::filesystem;

Budget parse_budget(const std::string& s) {
  Budget b;
  if (s.empty()) throw CaseError("budget", s, "empty (use e.g. 60s, 5m or a case count)");
  const char unit = s.back();
  const std::string num = (unit == 's' || unit == 'm' || unit == 'h') ? s.substr(0, s.size() - 1) : s;
  if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 12)
    throw CaseError("budget", s, "must be a number of cases (N) or a time (Ns, Nm, Nh)");
  const uint64_t n = std::stoull(num);
  if (n == 0) throw CaseError("budget", s, "must be > 0");
  if (unit == 's') b.seconds = double(n);
  else if (unit == 'm') b.seconds = 60.0 * double(n);
  else if (unit == 'h') b.seconds = 3600.0 * double(n);
  else b.cases = n;
  return b;
}

std::pair<int, int> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  auto bad = [&](const std::string& why) { return CaseError("shard", s, why); };
  if (slash == std::string::npos) throw bad("must be i/n, e.g. 0/4");
  const std::string a = s.substr(0, slash), b = s.substr(slash + 1);
  for (const auto& x : {a, b})
    if (x.empty() || x.find_first_not_of("0123456789") != std::string::npos)
      throw bad("must be i/n with non-negative integers, e.g. 0/4");
  constexpr int kMaxShards = 999999;  // i and n as int; more shards than cases a campaign runs is pointless
  auto num = [&](const std::string& x) {
    const size_t nz = std::min(x.find_first_not_of('0'), x.size() - 1);
    if (x.size() - nz > 6) throw bad(fmt::format("n must be at most {} (and i < n)", kMaxShards));
    return std::stoi(x.substr(nz));
  };
  const int i = num(a), n = num(b);
  if (n < 1 || i >= n) throw bad(fmt::format("needs 0 <= i < n, got i={} n={}", i, n));
  return {i, n};
}

std::string case_hash(const std::string& line) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : line) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::string failing_summary(const Verdict& v) {
  std::string s;
  for (const auto& m : v.metrics)
    if (m.failed) s += fmt::format("{}{}={:.6g} ({})", s.empty() ? "" : ", ", m.name, m.value, m.rule);
  if (s.empty()) s = std::string(verdict_name(v.kind)) + (v.reason.empty() ? "" : ": " + v.reason);
  return s;
}

std::string found_case_text(const CampaignOptions& opt, const FoundCase& f) {
  std::string s;
  s += "# found by attn-oracle fuzz (shrunk regression)\n";
  s += fmt::format("# backend: {}   vs: {}\n", opt.backend, opt.vs);
  s += fmt::format("# campaign: --seed {} --shard {}/{} --dims {}, case #{}\n", opt.seed, opt.shard, opt.shards,
                   opt.gen.dims == DimsProfile::Glm ? "glm" : "small", f.index);
  s += fmt::format("# original: {}\n", f.original);
  s += fmt::format("# original failing: {}\n", failing_summary(f.original_result.verdict));
  s += fmt::format("# shrunk in {} steps ({} runs{}); shrunk failing: {}\n", f.steps, f.runs,
                   f.shrink_budget_exhausted ? ", run budget exhausted" : "", failing_summary(f.shrunk_result.verdict));
  s += f.shrunk + "\n";
  return s;
}

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  auto backend = make_backend(opt.backend);
  auto vs = make_backend(opt.vs);
  CampaignSummary s;
  std::map<std::string, size_t> by_shrunk;
  if (!opt.out_dir.empty()) fs::create_directories(opt.out_dir);
  double last_progress = -1;
  for (uint64_t k = 0;; ++k) {
    if (opt.budget.cases > 0 && s.cases >= opt.budget.cases) break;
    if (opt.budget.seconds > 0 && elapsed() >= opt.budget.seconds) break;
    if (opt.max_failures > 0 && s.failed >= uint64_t(opt.max_failures)) break;
    const uint64_t index = uint64_t(opt.shard) + k * uint64_t(opt.shards);
    ++s.cases;
    Case c;
    try {
      c = generate_case(opt.seed, index, opt.gen);
    } catch (const CaseError& e) {
      ++s.invalid;
      s.invalid_lines.push_back(fmt::format("case #{}: generator produced an invalid case: {}", index, e.what()));
      continue;
    }
    CaseResult r = run_case(c, *backend, *vs, opt.lim);
    if (r.verdict.kind == Verdict::Pass) {
      ++s.passed;
    } else if (r.verdict.kind == Verdict::Skipped) {
      ++s.skipped;
    } else {
      ++s.failed;
      if (s.first_failure_case < 0) {
        s.first_failure_case = int64_t(k + 1);
        s.first_failure_seconds = elapsed();
      }
      const double ts = elapsed();
      ShrinkOptions so;
      so.max_runs = opt.shrink_runs;
      so.lim = opt.lim;
      ShrinkResult sr = shrink_case(c, fails_like(r, *backend, *vs, opt.lim), so);
      s.shrink_seconds += elapsed() - ts;
      FoundCase f;
      f.index = index;
      f.original = r.case_line;
      f.original_result = r;
      f.shrunk = print_case(sr.minimal);
      f.steps = sr.steps;
      f.runs = sr.runs;
      f.shrink_budget_exhausted = sr.budget_exhausted;
      if (!by_shrunk.count(f.shrunk)) {
        f.shrunk_result = run_case(sr.minimal, *backend, *vs, opt.lim);
        if (!opt.out_dir.empty()) {
          f.file = (fs::path(opt.out_dir) / (case_hash(f.shrunk) + ".case")).string();
          f.already_known = fs::exists(f.file);
          if (!f.already_known) {
            std::ofstream out(f.file);
            out << found_case_text(opt, f);
            if (!out) throw std::runtime_error("cannot write " + f.file);
          }
        }
        by_shrunk[f.shrunk] = s.unique.size();
        s.unique.push_back(std::move(f));
      }
    }
    if (opt.progress && elapsed() - last_progress >= 0.25) {
      last_progress = elapsed();
      err << fmt::format("\r[fuzz] {} cases  {} passed  {} failed ({} unique)  {} skipped  {:.0f} cases/s  {:.0f}s",
                         s.cases, s.passed, s.failed, s.unique.size(), s.skipped,
                         double(s.cases) / std::max(last_progress, 1e-9), last_progress)
          << std::flush;
    }
  }
  s.seconds = elapsed();
  if (opt.progress) err << "\n";
  return s;
}

std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s) {
  std::string out = fmt::format(
      "fuzz summary: backend {} vs {}, seed {}, shard {}/{}, dims {}\n"
      "  {} cases in {:.1f} s ({:.0f} cases/s): {} passed, {} failed, {} skipped, {} invalid (generator bugs)\n",
      opt.backend, opt.vs, opt.seed, opt.shard, opt.shards, opt.gen.dims == DimsProfile::Glm ? "glm" : "small",
      s.cases, s.seconds, double(s.cases) / std::max(s.seconds, 1e-9), s.passed, s.failed, s.skipped, s.invalid);
  for (const auto& l : s.invalid_lines) out += "  INVALID " + l + "\n";
  if (s.first_failure_case >= 0)
    out += fmt::format("  first failure: case {} of this shard after {:.3f} s; shrinking took {:.1f} s in all\n",
                       s.first_failure_case, s.first_failure_seconds, s.shrink_seconds);
  for (const auto& f : s.unique) {
    out += fmt::format("  FAIL case #{}: {}\n    shrunk ({} steps, {} runs{}): {}\n    failing: {}\n", f.index,
                       f.original, f.steps, f.runs, f.shrink_budget_exhausted ? ", run budget exhausted" : "",
                       f.shrunk, failing_summary(f.shrunk_result.verdict));
    if (!f.file.empty()) out += fmt::format("    {} {}\n", f.already_known ? "known:" : "wrote:", f.file);
  }
  out += fmt::format("fuzz-result cases={} failed={} unique={} skipped={} invalid={} first_failure_case={} "
                     "first_failure_seconds={:.3f} seconds={:.3f}\n",
                     s.cases, s.failed, s.unique.size(), s.skipped, s.invalid, s.first_failure_case,
                     s.first_failure_seconds, s.seconds);
  return out;
}

int campaign_exit_code(const CampaignSummary& s) {
  if (s.failed > 0 || s.invalid > 0) return 1;
  if (s.passed == 0) return 125;
  return 0;
}

}  // namespace ao

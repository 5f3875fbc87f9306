#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/backends/backend_spec.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/fuzz/choice_shrink.h"
#include "attn_oracle/fuzz/shrink.h"

namespace ao {

namespace fs = std::filesystem;

Budget parse_budget(const std::string& s) {
  Budget b;
  if (s.empty()) throw BadInput("budget", s, "empty (use e.g. 60s, 5m or a case count)");
  const char unit = s.back();
  const std::string num = (unit == 's' || unit == 'm' || unit == 'h') ? s.substr(0, s.size() - 1) : s;
  if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 12)
    throw BadInput("budget", s, "must be a number of cases (N) or a time (Ns, Nm, Nh)");
  const uint64_t n = std::stoull(num);
  if (n == 0) throw BadInput("budget", s, "must be > 0");
  if (unit == 's') b.seconds = double(n);
  else if (unit == 'm') b.seconds = 60.0 * double(n);
  else if (unit == 'h') b.seconds = 3600.0 * double(n);
  else b.cases = n;
  return b;
}

std::pair<int, int> parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  auto bad = [&](const std::string& why) { return BadInput("shard", s, why); };
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

std::string failure_signature(const std::string& backend, const Case& m, const Verdict& v) {
  std::string verdict = verdict_name(v.kind);
  if (v.kind == Verdict::Fail) {
    std::string names;
    for (const auto& n : failing_metrics(v)) names += (names.empty() ? "" : ",") + n;
    verdict += "[" + names + "]";
  }
  bool pad = m.tail > 0 || m.q_capacity >= 0 || m.kv_capacity >= 0 || !m.o_offsets.empty() ||
             !m.stats_offsets.empty();
  try {  // gaps before, between or after documents in any buffer, CP chunk padding included
    const Layout l = make_layout(m);
    int64_t q = 0, kv = 0;
    for (const auto& d : l.docs) {
      pad |= d.q_padded != d.q_len || d.kv_off != d.packed_kv_off || (!l.is_cp() && d.q_off != d.packed_q_off);
      q += d.q_padded;
      kv += d.kv_len;
    }
    pad |= l.kv_rows != kv || (l.is_cp() ? l.q_rows * m.cp : l.q_rows) != q;
  } catch (const CaseError&) {
    pad = true;  // cannot happen for a shrunk case (the shrinker keeps valid cases only)
  }
  const size_t docs = m.q_lens.size();
  return fmt::format("{} {} op={} mask={} window={} cp={} docs={} pad={} dtype={}", backend, verdict,
                     to_string(m.op), to_string(m.mask), m.window > 0 ? "yes" : "no",
                     m.cp > 1 ? "yes" : "no", docs >= 3 ? "3+" : std::to_string(docs), pad ? "yes" : "no",
                     m.dtype == DType::F32 ? "f32" : "16bit");
}

bool smaller_case(const Case& a, const Case& b) {
  auto key = [](const Case& c) {
    const int64_t tokens = std::accumulate(c.q_lens.begin(), c.q_lens.end(), int64_t(0)) +
                           std::accumulate(c.kv_lens.begin(), c.kv_lens.end(), int64_t(0));
    return std::make_tuple(tokens, c.q_lens.size(), print_case(c).size());
  };
  return key(a) < key(b);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  // Hidden and not *.case: a gate never picks up a temporary left by a crash.
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}", p.filename().string(), ::getpid());
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return std::runtime_error(fmt::format("cannot {} {}: {}", what, tmp.string(), why));
  };
  ::unlink(tmp.c_str());  // a stale temporary of a crashed run with this pid
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw fail("create");
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw fail("write");
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    throw fail("fsync");
  }
  if (::close(fd) != 0) throw fail("close");
  if (::rename(tmp.c_str(), p.c_str()) != 0) throw fail("rename to " + path + ":");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
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

namespace {

// The spec as a user re-runs it (normalize_backend_spec); as given when the registry does not know it.
std::string portable_spec(const std::string& spec) {
  try {
    return normalize_backend_spec(spec, SpecForm::Portable);
  } catch (const BadInput&) {
    return spec;
  }
}

std::string repro_note(int fails, int runs) {
  return fmt::format("reproduced {} of {} runs{}", fails, runs, fails < runs ? " (NONDETERMINISTIC)" : "");
}

}  // namespace

std::string found_case_text(const CampaignOptions& opt, const FoundCase& f) {
  CaseFileWriter w;
  w.note("found by attn-oracle fuzz (shrunk regression)");
  w.comment("backend", fmt::format("{}   vs: {}", portable_spec(opt.backend), portable_spec(opt.vs)));
  w.comment("campaign", fmt::format("--seed {} --shard {}/{} --dims {}, case #{}", opt.seed, opt.shard, opt.shards,
                                    dims_name(opt.gen.dims), f.index));
  w.comment("original", f.original);
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
  w.case_line(parse_case(f.shrunk));
  return w.text();
}

namespace {

// Signatures of the valid found files already in `dir` (those written with a `# signature:` line), as
// the line holds them (escape_comment_text).
std::map<std::string, std::string> known_signatures(const std::string& dir, const LayoutLimits& lim) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".case" && it->is_regular_file(ec)) files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string line, sig;
    try {
      for (int n = 1; n <= 64 && read_bounded_line(in, line, file, n); ++n)
        if (line.rfind("# signature: ", 0) == 0) {
          sig = line.substr(13);
          break;
        }
    } catch (const CaseFileError&) {
      continue;  // not a valid found file: not known (a campaign rewrites it when it finds its case)
    }
    if (!sig.empty() && !out.count(sig) && valid_found_file(file, lim)) out[sig] = file;
  }
  return out;
}

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

}  // namespace

CampaignSummary run_campaign(const CampaignOptions& opt, std::ostream& err) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  auto backend = make_backend(opt.backend);
  auto vs = make_backend(opt.vs);
  const std::string backend_id = normalize_backend_spec(opt.backend, SpecForm::Portable);
  CampaignSummary s;
  std::map<std::string, size_t> by_signature;  // -> index into s.unique
  std::map<std::string, std::string> known;    // signature -> file that existed before the campaign
  if (!opt.out_dir.empty()) {
    fs::create_directories(opt.out_dir);
    known = known_signatures(opt.out_dir, opt.lim);
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
        // Another campaign sharing the directory replaced it since: its replacement has this signature.
        known.erase(it);
        for (const auto& [sig, file] : known_signatures(opt.out_dir, opt.lim))
          if (sig == key && !ours.count(file)) {
            known[sig] = f.file = file;
            f.already_known = true;
            return;
          }
      }
      f.already_known = false;
      f.file = (fs::path(opt.out_dir) / (case_hash(f.shrunk) + ".case")).string();
      std::error_code ec;
      if (!ours.count(f.file) && valid_found_file(f.file, opt.lim)) {
        f.already_known = true;
        return;
      }
      f.resaved = !ours.count(f.file) && fs::exists(fs::symlink_status(f.file, ec));
      const std::string text = found_case_text(opt, f);
      write_file_atomically(f.file, text);
      ours[f.file] = text;
    } catch (const std::exception& e) {
      f.save_error = e.what();
      f.file.clear();
      f.already_known = f.resaved = false;
      err << fmt::format("{}attn-oracle fuzz: case #{} NOT SAVED in {}: {}\n  its shrunk line: {}\n",
                         opt.progress ? "\n" : "", f.index, opt.out_dir, f.save_error, f.shrunk)
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
  // failed like `r`, runs made}.
  auto reproductions = [&](const Case& c, const CaseResult& r, int runs) {
    const StillFails again = fails_like(r, *backend, *vs, opt.lim);
    std::pair<int, int> n{0, 0};
    for (; n.second < runs && !interrupted() && !(opt.budget.seconds > 0 && elapsed() >= opt.budget.seconds);
         ++n.second) {
      const double t = elapsed();
      n.first += again(c) ? 1 : 0;
      s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t);
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
    try {
      g = generate_recorded(opt.seed, index, opt.gen);
    } catch (const BadInput& e) {
      ++s.cases;
      ++s.invalid;
      s.invalid_lines.push_back(fmt::format("case #{}: generator produced an invalid case: {}", index, e.what()));
      continue;
    }
    const double t_run = elapsed();
    CaseResult r = run_case(g.c, *backend, *vs, opt.lim);
    s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t_run);
    if ((s.interrupted = interrupted()) != 0) break;  // a run cut short proves nothing: not counted
    ++s.cases;
    s.verdicts.add(r.verdict.kind);
    if (r.verdict.kind == Verdict::Fail || r.verdict.kind == Verdict::Error) {
      s.failing_indices.push_back(index);
      if (s.first_failure_case < 0) {
        s.first_failure_case = int64_t(k + 1);
        s.first_failure_seconds = elapsed();
      }
      const double ts = elapsed();
      FoundCase f;
      f.index = index;
      f.original = r.case_line;
      f.original_result = r;
      f.shrunk_result = r;
      const auto [again, reruns] = reproductions(g.c, r, opt.confirm_runs);
      f.repro_fails = 1 + again;
      f.repro_runs = 1 + reruns;
      if ((s.interrupted = interrupted()) != 0) break;  // re-runs cut short prove nothing
      if (f.repro_fails < f.repro_runs) {
        // A flaky failure is kept as it was generated: a shrinker steered by it would keep whatever
        // candidate happened to fail and present noise as a minimal case.
        f.shrunk = r.case_line;
        f.choices = g.choices;
        f.signature = failure_signature(backend_id, g.c, r.verdict);
      } else {
        const StillFails fails = fails_like(r, *backend, *vs, opt.lim, &f.shrunk_result);
        const ChoiceShrinkResult sr = shrink_choices(g.choices, opt.gen, [&](const Case& cand) {
          const double t = elapsed();
          const bool still = fails(cand);
          s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t);
          return still;
        }, so);
        // More than 3 documents left: the structural shrinker continues on the line itself (documents by
        // ddmin, lengths, pads, dims), since the generator's families cannot always lower the document
        // count (one huge document plus tiny ones). Its own run budget (--shrink-runs again); the deadline
        // is shared. The line then no longer replays from the choices, so they are not saved.
        const ShrinkOptions& rest = so;
        const bool more = sr.minimal.q_lens.size() > 3;
        const ShrinkResult st = more && (sr.stop == ShrinkStop::Minimum || sr.stop == ShrinkStop::RunBudget)
                                    ? shrink_case(sr.minimal, [&](const Case& cand) {
                                        const double t = elapsed();
                                        const bool still = fails(cand);
                                        s.longest_run_seconds = std::max(s.longest_run_seconds, elapsed() - t);
                                        return still;
                                      }, rest)
                                    : ShrinkResult{sr.minimal, 0, 0, false, sr.stop};
        f.shrunk = print_case(st.minimal);
        if (st.steps == 0) f.choices = sr.choices;  // a structurally shrunk line no longer replays from them
        f.steps = sr.steps + st.steps;
        f.runs = sr.runs + st.runs;
        f.shrink_stop = st.steps > 0 || st.runs > 0 ? st.stop : sr.stop;
        f.signature = failure_signature(backend_id, st.minimal, f.shrunk_result.verdict);
        // The shrunk case is confirmed like the original: a case the shrinker kept on one lucky failure
        // is marked, not passed off as a deterministic regression.
        const auto [shrunk_again, shrunk_reruns] = reproductions(st.minimal, r, opt.confirm_runs);
        f.shrunk_repro_fails = 1 + shrunk_again;
        f.shrunk_repro_runs = 1 + shrunk_reruns;
        if ((s.interrupted = interrupted()) != 0) break;
      }
      s.shrink_seconds += elapsed() - ts;
      const Case minimal = parse_case(f.shrunk);
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
                                : smaller_case(minimal, parse_case(kept.shrunk));
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
    if (opt.progress && elapsed() - last_progress >= 0.25) {
      last_progress = elapsed();
      err << fmt::format("\r[fuzz] {} cases  {} passed  {} failed ({} unique)  {} skipped  {:.0f} cases/s  {:.0f}s",
                         s.cases, s.verdicts[Verdict::Pass], s.verdicts.bad(), s.unique.size(),
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

std::string format_summary(const CampaignOptions& opt, const CampaignSummary& s) {
  std::string out = fmt::format(
      "fuzz summary: backend {} vs {}, seed {}, shard {}/{}, dims {}\n"
      "  {} cases in {:.1f} s ({:.0f} cases/s): {} passed, {} failed, {} skipped, {} invalid (generator bugs)\n",
      escape_comment_text(opt.backend), escape_comment_text(opt.vs), opt.seed, opt.shard, opt.shards,
      dims_name(opt.gen.dims),
      s.cases, s.seconds, double(s.cases) / std::max(s.seconds, 1e-9), s.verdicts[Verdict::Pass], s.verdicts.bad(),
      s.verdicts[Verdict::Skipped], s.invalid);
  if (s.interrupted != 0)
    out += fmt::format("  INTERRUPTED by signal {}: the counts cover the cases that finished\n", s.interrupted);
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
    out += fmt::format("  FAIL case #{}: {}\n    {}: {}\n    failing: {}\n", f.index, f.original, how, f.shrunk,
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
                     "interrupted={} nondeterministic={} unsaved={}\n",
                     s.cases, s.verdicts.bad(), s.unique.size(), merged, per_case.empty() ? "-" : per_case,
                     s.verdicts[Verdict::Skipped],
                     s.invalid, s.first_failure_case, s.first_failure_seconds, s.seconds, s.longest_run_seconds,
                     s.interrupted, s.nondeterministic, s.unsaved);
  return out;
}

int campaign_exit_code(const CampaignSummary& s) {
  return s.invalid > 0 ? 1 : s.verdicts.exit_code();  // a generator bug fails the campaign too
}

}  // namespace ao

// The CI gate: exit codes (pass, fail, skipped, --require-run, bad line with file:line), reports,
// and the corpus's own "# catches: <backend>" claims and found/ files' "# backend:" lines (each such
// case must fail under that bug model, so the committed corpus has teeth; the CTest test
// gate_corpus_cpu_ref replays the whole corpus on cpu-ref).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/pipeline/run_case.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

using test::Cmd;
using test::run_cli;
using test::run_sh;

struct TempCorpus {
  fs::path dir;
  explicit TempCorpus(const std::string& name) {
    dir = fs::temp_directory_path() / ("ao-gate-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "sub");
  }
  ~TempCorpus() { fs::remove_all(dir); }
  std::string write(const std::string& rel, const std::string& text) const {
    std::ofstream(dir / rel) << text;
    return (dir / rel).string();
  }
};

}  // namespace

TEST(Gate, PassesWritesReportsAndWalksDirectories) {
  TempCorpus t("pass");
  t.write("a.case", "# TE example\nop=sdpa lens=3,2,4 padded_offsets=0,4,8,13\n\n   \n");
  t.write("sub/b.case", "op=indexer docs=64,64 cp=2 rank=1 topk=8  # trailing comment\n");
  t.write("sub/ignored.txt", "this is not a case file\n");
  const std::string rep = (t.dir / "rep").string();
  auto r = run_cli("gate " + t.dir.string() + " --backend cpu-ref --report-dir " + rep);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 cases x 1 backend(s): 2 passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a.case:2"), std::string::npos) << r.out;
  for (const char* f : {"report.json", "report.md", "report.xml"}) EXPECT_TRUE(fs::exists(fs::path(rep) / f)) << f;
}

TEST(Gate, FailsWhenACaseFails) {
  TempCorpus t("fail");
  const auto f = t.write("a.case", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13\nop=sdpa docs=16\n");
  auto r = run_cli("gate " + f + " --backend cpu-bug:derived-offsets");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL    " + f + ":1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS    " + f + ":2"), std::string::npos) << r.out;
}

TEST(Gate, SkippedCasesAreListedAndFailOnlyWithRequireRun) {
  TempCorpus t("skip");
  // tail-read models an SDPA defect: it declines the indexer case (skipped, with the reason).
  const auto f = t.write("a.case", "op=sdpa docs=16\nop=indexer docs=16\n");
  auto r = run_cli("gate " + f + " --backend cpu-bug:tail-read");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped (1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(f + ":2"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("gate " + f + " --backend cpu-bug:tail-read --require-run").code, 1);
  const auto only = t.write("b.case", "op=indexer docs=16\n");
  EXPECT_EQ(run_cli("gate " + only + " --backend cpu-bug:tail-read").code, 125);  // nothing ran
}

// A case whose gate cannot reject an all-zero answer (atol=1e9 on O) is WEAK: listed and counted apart,
// exit 0, and under --strict it fails the gate; its report counts it in every format.
TEST(Gate, WeakCasesAreCountedApartAndFailOnlyWithStrict) {
  TempCorpus t("weak");
  const auto f = t.write("a.case", "op=sdpa docs=16,5 hq=2 dim=8\nop=sdpa docs=16,5 hq=2 dim=8 atol=1e9 rtol=0\n");
  const std::string rep = (t.dir / "rep").string();
  auto r = run_cli("gate " + f + " --backend cpu-ref --report-dir " + rep);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("WEAK    " + f + ":2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weak:o (a zero o passes every gate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weak (1): a gate of the case cannot reject an all-zero or NaN answer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 cases x 1 backend(s): 1 passed, 0 failed, 1 weak, 0 skipped -> PASS"), std::string::npos) << r.out;
  const std::string json = test::slurp(fs::path(rep) / "report.json");
  EXPECT_NE(json.find("\"weak\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"gate_checks\""), std::string::npos);
  EXPECT_NE(test::slurp(fs::path(rep) / "report.md").find("1 passed, 0 failed, 1 weak"), std::string::npos);
  EXPECT_NE(test::slurp(fs::path(rep) / "report.xml").find("<property name=\"weak\" value=\"1\"/>"), std::string::npos);
  auto s = run_cli("gate " + f + " --backend cpu-ref --strict");
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("--strict: they fail the gate"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("-> FAIL"), std::string::npos) << s.out;
}

TEST(Gate, BadLineNamesFileLineAndKeyAndRunsNothing) {
  TempCorpus t("bad");
  const auto f = t.write("a.case", "op=sdpa docs=16\n# ok\nop=indexer docs=96 cp=32 rank=3\n");
  auto r = run_cli("gate " + f + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(f + ":3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'docs'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;  // validated before anything ran
  const auto g = t.write("b.case", "op=sdpa docs=16 colour=blue\n");
  auto u = run_cli("gate " + g + " --backend cpu-ref");
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.out.find(g + ":1:"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("'colour'"), std::string::npos) << u.out;
  EXPECT_EQ(run_cli("gate " + (t.dir / "missing.case").string() + " --backend cpu-ref").code, 2);
}

TEST(Gate, CorpusCatchesClaimsHold) {
  const std::string root = std::string(AO_SOURCE_DIR) + "/corpus";
  const auto files = collect_case_files({root + "/seeds", root + "/edge", root + "/found"});
  ASSERT_FALSE(files.empty());
  auto ref = make_backend("cpu-ref");
  int claims = 0;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line, claim;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.rfind("# catches: ", 0) == 0) {
        claim = line.substr(11);
        continue;
      }
      if (line.rfind("# backend: ", 0) == 0) {  // found/ files: the backend the case was shrunk against
        // An external kernel's found case (exec:, plugin:) claims nothing here: its program, server and GPU
        // are not here, and the spec's first word is not the backend; only a `# catches:` line claims.
        const std::string be = line.substr(11, line.find(' ', 11) - 11);
        if (be.rfind("exec:", 0) != 0 && be.rfind("plugin:", 0) != 0) claim = be;
        continue;
      }
      const std::string text = case_text_of_line(line);
      if (text.empty() || claim.empty()) continue;
      // Large seed cases are checked at reduced dims here: the claim is about the layout.
      Case c = parse_case(text);
      if (c.op == Op::Indexer && c.heads > 8) {
        c.heads = 4;
        c.dim = 32;
        c.topk = std::min(c.topk, 256);
      }
      // A claim against a backend that cannot run here (a GPU kernel's found cases) is not checked.
      std::unique_ptr<Backend> bug;
      try {
        bug = make_backend(claim);
      } catch (const BadInput&) {
        claim.clear();
        continue;
      }
      if (!bug->unavailable_reason().empty()) {
        claim.clear();
        continue;
      }
      const CaseResult r = run_case(c, *bug, *ref);
      EXPECT_EQ(r.verdict.kind, Verdict::Fail) << file << ":" << n << " claims " << claim << ": " << r.case_line;
      ++claims;
      claim.clear();
    }
  }
  EXPECT_GT(claims, 30);
}

// An empty .case file (a crashed save), one with comments only, or binary garbage is an error naming
// the file (before: the empty one was silently skipped and its regression lost).
TEST(Gate, EmptyOrUnparsableCaseFileIsAnError) {
  TempCorpus t("empty");
  t.write("sub/good.case", "op=sdpa docs=16\n");
  const auto empty = t.write("sub/empty.case", "");
  auto r = run_cli("gate " + t.dir.string() + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(empty + ": no case line"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
  const auto comments = t.write("comments.case", "# only a comment\n\n");
  EXPECT_EQ(run_cli("gate " + comments + " --backend cpu-ref").code, 2);
  const auto garbage = t.write("garbage.case", std::string("\x7f" "ELF\x02\x01\x01\0\0\xff\xfe", 12) + "\n");
  r = run_cli("gate " + garbage + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(garbage + ":1:"), std::string::npos) << r.out;
}

// Chosen behaviour: a symlink loop anywhere under a corpus dir is a clear exit-2 error naming the path
// (it could hide a case file, so it is not skipped); before: an uncaught filesystem exception.
TEST(Gate, SymlinkLoopIsAnErrorNamingThePath) {
  TempCorpus t("loop");
  t.write("a.case", "op=sdpa docs=16\n");
  const fs::path loop = t.dir / "sub" / "loop";
  fs::create_symlink(loop, loop);
  auto r = run_cli("gate " + t.dir.string() + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(loop.string() + ": cannot resolve: Too many levels of symbolic links"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("gate " + loop.string() + " --backend cpu-ref").code, 2);
  fs::remove(loop);
  fs::create_symlink(t.dir / "sub" / "gone", loop);  // a dangling link is not a loop: no case file there
  EXPECT_EQ(run_cli("gate " + t.dir.string() + " --backend cpu-ref").code, 0);
}

// `# catches:` claims are checked by the gate itself: an unknown backend is exit 2 naming file:line,
// a claim whose case passes on the claimed backend fails the gate.
TEST(Gate, CatchesClaimsAreCheckedByTheGate) {
  TempCorpus t("claims");
  const auto unknown = t.write("unknown.case", "op=sdpa docs=16\n# catches: cpu-bug:no-such-model\nop=sdpa docs=32\n");
  auto r = run_cli("gate " + unknown + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(unknown + ":2: '# catches: cpu-bug:no-such-model'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;

  const auto dangling = t.write("dangling.case", "op=sdpa docs=16\n# catches: cpu-ref\n");
  r = run_cli("gate " + dangling + " --backend cpu-ref");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(dangling + ":2: '# catches: cpu-ref' is not followed by a case line"), std::string::npos);

  // A false claim: derived-offsets does not break a single unpadded document.
  const auto f = t.write("claims.case",
                         "# catches: cpu-bug:derived-offsets\nop=sdpa lens=3,2,4 padded_offsets=0,4,8,13\n"
                         "# catches: cpu-bug:derived-offsets\nop=sdpa docs=16\n");
  r = run_cli("gate " + f + " --backend cpu-bug:derived-offsets");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL    " + f + ":4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("claim not held: " + f + ":3 '# catches: cpu-bug:derived-offsets', but the case passed"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 of 2 claims held"), std::string::npos) << r.out;
  // Claims bind only their backend: cpu-ref passes both cases.
  r = run_cli("gate " + f + " --backend cpu-ref");
  EXPECT_EQ(r.code, 0) << r.out;
  // Held claims: the true one alone.
  const auto held = t.write("held.case", "# catches: cpu-bug:derived-offsets\nop=sdpa lens=3,2,4 padded_offsets=0,4,8,13\n");
  r = run_cli("gate " + held + " --backend cpu-bug:derived-offsets");
  EXPECT_EQ(r.code, 1) << r.out;  // the bug model fails, as claimed
  EXPECT_NE(r.out.find("1 of 1 claims held"), std::string::npos) << r.out;
}

// A claim is checked on every spelling of its backend (normalize_backend_spec): `.` in a path, a
// knob at its default (`bug=none`) or a blank too many on one side does not hide a false claim.
TEST(Gate, FalseClaimIsCheckedWhateverItsSpelling) {
  TempCorpus t("claim-spelling");
  const fs::path lib(AO_EXAMPLE_PLUGIN);
  const std::string dotted = (lib.parent_path() / "." / lib.filename()).string();
  for (const std::string& claim : {"plugin:" + dotted, "plugin:" + lib.string() + ":bug=none",
                                   "  plugin:" + dotted + ":bug=none  "}) {
    const auto f = t.write("false.case", "# catches: " + claim + "\nop=sdpa docs=16 hq=2 dim=8\n");
    const auto r = run_cli("gate " + f + " --backend plugin:" + lib.string() + " --no-explain");
    EXPECT_EQ(r.code, 1) << claim << "\n" << r.out;  // the plugin computes it right: the claim is false
    EXPECT_NE(r.out.find("claim not held"), std::string::npos) << claim << "\n" << r.out;
    EXPECT_NE(r.out.find("0 of 1 claims held"), std::string::npos) << claim << "\n" << r.out;
  }
}

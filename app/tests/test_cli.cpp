// The attn-oracle binary (AO_CLI): bad input exits 2 with stderr naming the key; the seed cases and
// the demo run and exit 0 under cpu-ref; the top-left bug model of the seed PR exits 1.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "temp_files.h"

using namespace std::string_literals;
using ao::test::slurp;

namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

// Each call captures into its own temporary folder: CTest runs these tests as parallel processes, and
// fixed file names under the shared temp dir let one test read another's output.
CliRun cli(const std::string& args) {
  const ao::test::TempDir dir;
  const std::string out = (dir.path / "out.txt").string(), err = (dir.path / "err.txt").string();
  const std::string cmd = std::string(AO_CLI) + " " + args + " >" + out + " 2>" + err;
  const int st = std::system(cmd.c_str());
  CliRun r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

TEST(Cli, BadInputExitsTwoNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"repro op=indexer foo=1", "'foo'"},
      {"repro op=indexer topk=0", "'topk'"},
      {"repro op=indexer topk=12x", "'topk'"},
      {"repro op=indexer cp=2 cp=2", "'cp'"},
      {"repro op=indexer docs=100 cp=4", "'docs'"},
      {"repro op=indexer docs=64 cp=4 rank=4", "'rank'"},
      {"repro op=sdpa hq=6 hkv=4", "'hkv'"},
      {"repro op=sdpa window=3 mask=none", "'window'"},
      {"repro op=sdpa lens=3,2 padded_offsets=0,2", "'padded_offsets'"},
      {"show op=sdpa topk=5", "'topk'"},
      {"repro op=indexer docs=8192 --backend no-such-backend", "'backend'"},
      {"--max-mem 0.001 repro op=indexer docs=65536 heads=8 dim=64 topk=256", "bytes"},
  };
  for (const auto& [args, key] : bad) {
    SCOPED_TRACE(args);
    const CliRun r = cli(args);
    EXPECT_EQ(r.rc, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << "stderr: " << r.err;
  }
  // A usage error (unknown subcommand / option) is bad input too.
  EXPECT_EQ(cli("frobnicate").rc, 2);
  EXPECT_EQ(cli("repro --no-such-option").rc, 2);
}

TEST(Cli, SeedCasesPassUnderTheReference) {
  for (const char* line : {"op=indexer docs=65536,65536 cp=32 rank=31 heads=8 dim=64 topk=256",
                           "op=indexer docs=8192,4096 cp=32 rank=15 heads=8 dim=64 topk=256"}) {
    SCOPED_TRACE(line);
    const CliRun r = cli("repro "s + line + " --backend cpu-ref");
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  }
}

TEST(Cli, SeedBugIsCaughtAndDemoPasses) {
  const CliRun bug = cli("repro op=indexer docs=8192,4096 cp=32 rank=15 heads=8 dim=64 topk=256 --backend cpu-bug:topleft-cp");
  EXPECT_EQ(bug.rc, 1) << bug.out << bug.err;
  EXPECT_NE(bug.out.find("FAIL"), std::string::npos) << bug.out;
  const CliRun demo = cli("repro");
  EXPECT_EQ(demo.rc, 0) << demo.out << demo.err;
  EXPECT_NE(demo.out.find("cpu-ref passed and the bug model was caught"), std::string::npos) << demo.out;
}

// Option values out of range are rejected naming the option, not wrapped, clamped or accepted.
TEST(Cli, BadOptionValuesExitTwoNamingTheOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--max-mem nan show op=indexer", "--max-mem"},
      {"--max-mem inf show op=indexer", "--max-mem"},
      {"--max-mem -1 show op=indexer", "--max-mem"},
      {"--max-mem '' show op=indexer", "--max-mem"},
      {"--max-mem 0 show op=indexer", "--max-mem"},
      {"--max-mem 1e30 show op=indexer", "--max-mem"},
      {"fuzz --backend cpu-ref --budget 1 --seed -1", "--seed"},
      {"fuzz --backend cpu-ref --budget 1 --seed 18446744073709551616", "--seed"},
      {"fuzz --backend cpu-ref --budget 1 --seed 1e3", "--seed"},
      {"fuzz --backend cpu-ref --budget 1 --max-failures -1", "--max-failures"},
      {"fuzz --backend cpu-ref --budget 1 --shrink-runs -5", "--shrink-runs"},
      {"shrink op=indexer --backend cpu-ref --runs -1", "--runs"},
  };
  for (const auto& [args, opt] : bad) {
    SCOPED_TRACE(args);
    const CliRun r = cli(args);
    EXPECT_EQ(r.rc, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(opt), std::string::npos) << "stderr: " << r.err;
  }
  // The full range of seeds is accepted (2^64-1 is a seed like any other).
  const CliRun top = cli("fuzz --backend cpu-ref --budget 1 --no-save --seed 18446744073709551615");
  EXPECT_EQ(top.rc, 0) << top.out << top.err;
  // --shard: the limit is stated as a limit, not as "non-negative integers".
  const CliRun shard = cli("fuzz --backend cpu-ref --budget 1 --shard 0/1000000");
  EXPECT_EQ(shard.rc, 2);
  EXPECT_NE(shard.err.find("at most 999999"), std::string::npos) << shard.err;
  EXPECT_EQ(cli("fuzz --backend cpu-ref --budget 1 --no-save --shard 000003/000004").rc, 0);
}

// A refusal by the memory cap names the key that made the case large; `show` of a huge case does
// not build per-row vectors (it used to take 16.9 s and 5.4 GiB for docs=300000000).
TEST(Cli, MemoryCapNamesTheKeyAndShowStaysCheap) {
  const CliRun topk = cli("--max-mem 1 repro op=indexer docs=1000 topk=65536");
  EXPECT_EQ(topk.rc, 2);
  EXPECT_NE(topk.err.find("'topk'"), std::string::npos) << topk.err;
  const CliRun tail = cli("--max-mem 1 repro op=indexer docs=100 tail=200000000 heads=1 dim=1 topk=1");
  EXPECT_EQ(tail.rc, 2);
  EXPECT_NE(tail.err.find("'tail'"), std::string::npos) << tail.err;
  const CliRun show = cli("--max-mem 64 show op=indexer docs=300000000 heads=1 dim=1 topk=1");
  EXPECT_EQ(show.rc, 0) << show.err;
  EXPECT_NE(show.out.find("checked rows: 300000000 of 300000000"), std::string::npos) << show.out;
}

// A corpus file saved with a UTF-8 byte-order mark (first line a comment) reads like one without.
TEST(Cli, CorpusFileWithByteOrderMark) {
  const std::string path = ::testing::TempDir() + "ao_bom.case";
  {
    std::ofstream f(path, std::ios::binary);
    f << "\xEF\xBB\xBF# saved by an editor that writes a BOM\nop=sdpa docs=8,5 hq=2 dim=8\n";
  }
  const CliRun r = cli("gate " + path + " --backend cpu-ref");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gate: 1 cases"), std::string::npos) << r.out;
  {
    std::ofstream f(path, std::ios::binary);
    f << "\xEF\xBB\xBFop=sdpa docs=8,5 hq=2 dim=8\n";
  }
  const CliRun r2 = cli("gate " + path + " --backend cpu-ref");
  EXPECT_EQ(r2.rc, 0) << r2.out << r2.err;
  EXPECT_NE(r2.out.find("gate: 1 cases"), std::string::npos) << r2.out;
}

TEST(Cli, ShowPrintsTheSeedLayout) {
  const CliRun r = cli("show op=indexer docs=65536,65536 cp=32 rank=31");
  ASSERT_EQ(r.rc, 0) << r.err;
  // Chunks 31 and 32 of each document, causal offsets 31*1024 and 32*1024.
  EXPECT_NE(r.out.find("positions [31744, 32768)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("positions [32768, 33792)"), std::string::npos) << r.out;
}

}  // namespace

// An OpenMP team too large to create would make libgomp end the process with exit 1 (the FAIL code):
// every team the core starts is bounded by the CPUs, so a valid OMP_NUM_THREADS never changes a verdict.
TEST(Cli, HugeOmpNumThreadsIsBoundedNotAFail) {
  for (const char* v : {"3000", "100000"})
    for (const char* line : {"op=sdpa docs=70,50 hq=4 hkv=2", "op=indexer docs=300,200 topk=16"}) {
      ASSERT_EQ(setenv("OMP_NUM_THREADS", v, 1), 0);
      const CliRun r = cli("repro "s + line);
      unsetenv("OMP_NUM_THREADS");
      EXPECT_EQ(r.rc, 0) << v << " " << line << "\n" << r.out << r.err;
      EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out << r.err;
    }
}

// `backends` names what the reference runs on: the GEMM library and its kernels, and the thread count.
// Under OMP_PROC_BIND the OpenMP runtime binds the initial thread to one place before main: the team size
// must still come from all the places (the process's CPUs), not that one place's mask (before: 1 thread
// for OMP_PROC_BIND=close OMP_PLACES=cores OMP_NUM_THREADS=2 on a 2-core machine). A named OPENBLAS_CORETYPE
// shows as the kernels in use.
TEST(Cli, BackendsNameTheReferenceGemmKernelsAndThreads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int want = std::min(2, CPU_COUNT(&set));
  const std::vector<std::vector<std::pair<const char*, const char*>>> envs = {
      {{"OMP_NUM_THREADS", "2"}},
      {{"OMP_NUM_THREADS", "2"}, {"OMP_PROC_BIND", "close"}, {"OMP_PLACES", "cores"}},
      {{"OMP_NUM_THREADS", "2"}, {"OMP_PROC_BIND", "spread"}, {"OMP_PLACES", "threads"}},
      {{"OMP_NUM_THREADS", "2"}, {"OMP_PROC_BIND", "true"}}};
  for (const auto& env : envs) {
    std::string named;
    for (const auto& [k, v] : env) {
      ASSERT_EQ(setenv(k, v, 1), 0);
      named += std::string(k) + "=" + v + " ";
    }
    const CliRun r = cli("backends");
    for (const auto& [k, v] : env) unsetenv(k);
    ASSERT_EQ(r.rc, 0) << named << r.out << r.err;
    const std::string threads = "; " + std::to_string(want) + (want == 1 ? " thread;" : " threads;");
    EXPECT_NE(r.out.find("cpu-ref "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(threads), std::string::npos) << named << "wanted '" << threads << "' in\n" << r.out;
  }
#if AO_BLAS
  ASSERT_EQ(setenv("OPENBLAS_CORETYPE", "Haswell", 1), 0);
  const CliRun r = cli("backends");
  unsetenv("OPENBLAS_CORETYPE");
  EXPECT_NE(r.out.find("exact CPU reference (OpenBLAS "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", Haswell kernels; "), std::string::npos) << r.out;
#else
  EXPECT_NE(cli("backends").out.find("exact CPU reference (Eigen's GEMM; "), std::string::npos);
#endif
}

// Every command goes through the one registrar: each app/cmd_*.cpp registers exactly one subcommand
// (one CommandRegistrar, one add_subcommand), no other CLI source adds one or names a command for
// dispatch, and the registered commands are exactly the ones `--help` lists, each with its own help (exit 0).
TEST(Cli, EveryCommandComesFromOneRegistrationAndIsInHelp) {
  namespace fs = std::filesystem;
  const std::regex add_sub(R"re(add_subcommand\(\s*"([^"]+)")re");
  std::set<std::string> registered;
  std::string main_text;
  for (const auto& e : fs::directory_iterator(fs::path(AO_SOURCE_DIR) / "app")) {
    if (e.path().extension() != ".cpp") continue;
    const std::string file = e.path().filename().string(), text = slurp(e.path().string());
    if (file == "main.cpp") main_text = text;
    std::vector<std::string> names;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), add_sub); it != std::sregex_iterator(); ++it)
      names.push_back((*it)[1]);
    const std::regex registrar(R"re(\bCommandRegistrar\s+\w+\s*\()re");
    const auto registrars =
        size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), registrar), std::sregex_iterator()));
    if (file.rfind("cmd_", 0) == 0) {
      EXPECT_EQ(registrars, 1u) << file;
      EXPECT_EQ(names.size(), 1u) << file;
    } else {
      EXPECT_EQ(registrars, 0u) << file << ": commands register in their own cmd_*.cpp";
      EXPECT_TRUE(names.empty()) << file << ": adds subcommand " << (names.empty() ? "" : names[0]);
    }
    registered.insert(names.begin(), names.end());
  }
  ASSERT_FALSE(main_text.empty());
  ASSERT_GE(registered.size(), 12u);
  for (const auto& name : registered)
    EXPECT_EQ(main_text.find("\"" + name + "\""), std::string::npos) << "main.cpp names the command " << name;

  const CliRun help = cli("--help");
  ASSERT_EQ(help.rc, 0) << help.err;
  const size_t sub = help.out.find("\nSubcommands:\n");
  ASSERT_NE(sub, std::string::npos) << help.out;
  std::set<std::string> listed;
  std::istringstream lines(help.out.substr(sub + 14));
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') continue;  // a wrapped description
    std::istringstream words(line);
    std::string name;
    if (words >> name) listed.insert(name);
  }
  EXPECT_EQ(listed, registered);
  for (const auto& name : registered) {
    const CliRun r = cli(name + " --help");
    EXPECT_EQ(r.rc, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  }
}

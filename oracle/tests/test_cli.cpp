// The attn-oracle binary (AO_CLI): bad input exits 2 with stderr naming the key; the seed cases and
// the demo run and exit 0 under cpu-ref; the top-left bug model of the seed PR exits 1.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

using namespace std::string_literals;

namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CliRun cli(const std::string& args) {
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "ao_cli_out.txt", err = dir + "ao_cli_err.txt";
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

TEST(Cli, ShowPrintsTheSeedLayout) {
  const CliRun r = cli("show op=indexer docs=65536,65536 cp=32 rank=31");
  ASSERT_EQ(r.rc, 0) << r.err;
  // Chunks 31 and 32 of each document, causal offsets 31*1024 and 32*1024.
  EXPECT_NE(r.out.find("positions [31744, 32768)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("positions [32768, 33792)"), std::string::npos) << r.out;
}

}  // namespace

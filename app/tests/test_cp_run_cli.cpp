// cp-run from the command line: bad input is exit 2 on any machine; without a GPU (CI) the run is a
// visible skip (exit 125 with the reason), never a pass. The GPU evidence is results/gpu/cp-run-*.
#include <gtest/gtest.h>

#include <string>

#include "cli_run.h"

namespace {

int run(const std::string& args, std::string& out) {
  const auto r = ao::test::run_cli(args);
  out = r.out;
  return r.code;
}

}  // namespace

TEST(CpRunCli, BadInputIsExit2NamingTheKey) {
  std::string out;
  if (run("cp-run --help", out) != 0 || out.find("cp-run") == std::string::npos) GTEST_SKIP() << "cp-run not built here";
  EXPECT_EQ(run("cp-run op=indexer docs=100 cp=32", out), 2) << out;
  EXPECT_NE(out.find("'docs'"), std::string::npos) << out;
  const bool cuda_build = run("cp-run op=indexer docs=8192 cp=32 rows=1", out) != 125 ||
                          out.find("no CUDA") == std::string::npos;
  if (cuda_build) {  // the backend is checked by the CUDA part
    EXPECT_EQ(run("cp-run op=indexer docs=8192 cp=32 --backend cpu-ref", out), 2) << out;
    EXPECT_NE(out.find("'backend'"), std::string::npos) << out;
  }
  EXPECT_EQ(run("cp-run op=indexer docs=8192 cp=32 --gpus 3", out), 2) << out;
  EXPECT_NE(out.find("'cp'"), std::string::npos) << out;
}

TEST(CpRunCli, WithoutGpuItIsAVisibleSkip) {
  std::string out;
  if (run("cp-run --help", out) != 0 || out.find("cp-run") == std::string::npos) GTEST_SKIP() << "cp-run not built here";
  const int rc = run("cp-run op=indexer docs=8192 cp=32 heads=8 dim=64 topk=256 rows=16", out);
  if (rc == 0) {
    EXPECT_NE(out.find("every rank passed"), std::string::npos) << out;  // a GPU is present
    return;
  }
  EXPECT_EQ(rc, 125) << out;
  EXPECT_NE(out.find("skipped"), std::string::npos) << out;
}

// `attn-oracle show` (app/layout_text.cpp: display code lives in app/, not in the layout core): it
// prints the layout of a huge case fast, because validation builds nothing per row (test_memory_cap.cpp).
#include <gtest/gtest.h>

#include <chrono>

#include "cli_run.h"

using namespace ao::test;

TEST(Show, DescribesHugeCasesWithoutPerRowWork) {
  for (const char* line : {"op=indexer docs=300000000 heads=1 dim=1 topk=1",
                           "op=indexer docs=4000000 heads=1 dim=1 topk=1 rows=3999999"}) {
    SCOPED_TRACE(line);
    const auto t0 = std::chrono::steady_clock::now();
    const Cmd r = run_cli(std::string("--max-mem 1000000 show ") + line);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("query segments (q_causal_offset = pos0):"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("checked rows: "), std::string::npos) << r.out;
    EXPECT_LT(s, 5.0);
  }
}

TEST(Show, PrintsSegmentsPadSlotsAndMemory) {
  const Cmd r = run_cli("show op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("buffers: Q 13 rows, K/V 13 rows"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pad slots: Q 4 rows outside segments, K/V 4 rows"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checked rows: 9 of 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory: about"), std::string::npos) << r.out;
}

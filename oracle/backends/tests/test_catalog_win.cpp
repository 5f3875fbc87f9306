// The catalog's window, alignment, CP and offset bug models (their trigger and outside cases run in
// test_bug_model_claims.cpp): each carries its catalog id, public source and a defect class.
#include <gtest/gtest.h>

#include "../models/models.h"
#include "attn_oracle/backends/bug_models.h"

using namespace ao;

TEST(CatalogWin, EveryModelHasProvenance) {
  const auto models = models::window_models();
  EXPECT_EQ(models.size(), 10u);
  for (const auto& m : models) {
    SCOPED_TRACE(m.name);
    EXPECT_FALSE(m.catalog.empty());
    EXPECT_FALSE(m.source.empty());
    EXPECT_NE(m.defect_class, DefectClass::Generic);
  }
}

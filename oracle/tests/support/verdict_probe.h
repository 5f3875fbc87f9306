// Test helpers for comparator tests: the exact reference's outputs of a layout, and one metric of a
// verdict by name (a missing metric is a test failure, never a silent NaN).
#pragma once
#include <cmath>

#include <gtest/gtest.h>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/reference/reference.h"

namespace ao::test {

inline Outputs reference(const Layout& l, const Inputs& in) {
  Outputs o = make_sentinel_outputs(l);
  if (l.c.op == Op::Indexer) reference_indexer(l, in, o);
  else reference_sdpa(l, in, o);
  return o;
}

inline double metric(const Verdict& v, const char* name) {
  const Metric* m = v.find(name);
  EXPECT_NE(m, nullptr) << name;
  return m ? m->value : NAN;
}

inline bool failed(const Verdict& v, const char* name) {
  const Metric* m = v.find(name);
  EXPECT_NE(m, nullptr) << name;
  return m && m->failed;
}

}  // namespace ao::test

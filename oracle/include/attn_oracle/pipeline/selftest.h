// The kill matrix: every bug model runs over a built-in set of layout families and must be caught
// by the comparators wherever it is observable. Observability is decided independently of the
// comparators: a bug model is observable on a family iff its outputs differ bitwise from cpu-ref's
// on the region the comparator judges (checked valid rows, plus output pad slots when pad writes are
// forbidden). An observable bug that the comparator passes is MISSED. The self-test fails when any
// cell is MISSED, a bug model is observable on none of its families, cpu-ref fails any family, a
// non-observable bug is failed anyway (the region and the comparator disagree), or a gated metric is
// failed by no bug model at all (a check that cannot fail).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attn_oracle/compare/compare.h"

namespace ao {

struct LayoutFamily {
  std::string name, case_line;
};

// Small dims: the whole matrix runs in a few seconds.
const std::vector<LayoutFamily>& selftest_families();

enum class CellKind { Detected, Missed, NotObservable, Skip, FalseFail, Error };
const char* cell_name(CellKind k);

struct SelftestCell {
  CellKind kind = CellKind::Skip;
  std::string detail;  // failing metrics, or the skip / error reason
};

struct SelftestResult {
  std::vector<LayoutFamily> families;
  std::vector<std::string> models;                    // bug model names (cpu-bug:<name>)
  std::vector<Verdict::Kind> ref;                      // cpu-ref vs cpu-ref per family
  std::vector<std::vector<SelftestCell>> cells;        // [model][family]
  std::map<std::string, std::vector<std::string>> killed_by;  // gated metric -> models failing it
  std::vector<std::string> problems;                   // why the self-test fails; empty = pass
  bool ok() const { return problems.empty(); }
};

// Bitwise comparison of two backends' outputs on the region compare() judges (see above).
// Indexer: top-k indices only (scores are informational), a checked row as a set (its order is not
// judged) unless ties=strict; -1 in a Q pad row counts as unwritten.
bool outputs_differ(const Layout& l, const Outputs& a, const Outputs& b);

// seed_offset is added to every family's seed (0 = the built-in seeds).
SelftestResult run_selftest(const std::vector<LayoutFamily>& families, uint64_t seed_offset = 0);
std::string format_selftest(const SelftestResult& r, bool verbose);

}  // namespace ao

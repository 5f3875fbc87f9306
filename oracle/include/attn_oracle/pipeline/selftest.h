// The kill matrix: every bug model runs over a built-in set of layout families and must be caught
// by the comparators wherever it is observable. Observability is decided independently of the
// comparators: a bug model is observable on a family iff its outputs differ bitwise from cpu-ref's
// on the region the comparator judges (checked valid rows, plus output pad slots when pad writes are
// forbidden). An observable bug that the comparator passes is MISSED. The self-test fails when any
// cell is MISSED, a bug model is observable on none of its families, cpu-ref fails any family, a
// non-observable bug is failed anyway (the region and the comparator disagree), a gated metric is
// failed by no bug model at all (a check that cannot fail), or a detected model is misdiagnosed by
// explain (the diagnosis matrix below).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attn_oracle/compare/compare.h"
#include "attn_oracle/pipeline/explain.h"

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

// The diagnosis matrix: for every Detected cell, explain (explain.h, bitwise) on the injected model's
// outputs, with every model's outputs from the kill matrix's own runs as candidates, must name the
// injected model (Named) or one whose outputs equal its outputs on the judged region (Equivalent);
// anything else (Wrong) is a self-test problem.
enum class DiagnosisKind { None, Named, Equivalent, Wrong };
const char* diagnosis_name(DiagnosisKind k);
struct DiagnosisCell {
  DiagnosisKind kind = DiagnosisKind::None;  // None: not a Detected cell
  std::string best;                          // the explanation's best models ("a = b"), or its headline
};
// outs: every candidate model's outputs by model id (null or absent: equal to cpu-ref's).
DiagnosisCell diagnose(const Layout& l, const Explanation& e, const std::string& injected,
                       const std::map<std::string, const Outputs*>& outs);

struct SelftestResult {
  std::vector<LayoutFamily> families;
  std::vector<std::string> models;                    // bug model names (cpu-bug:<name>)
  std::vector<Verdict::Kind> ref;                      // cpu-ref vs cpu-ref per family
  std::vector<std::vector<SelftestCell>> cells;        // [model][family]
  std::vector<std::vector<DiagnosisCell>> diagnosis;  // [model][family]
  std::map<std::string, std::vector<std::string>> killed_by;  // gated metric -> models failing it
  std::vector<std::string> problems;                   // why the self-test fails; empty = pass
  bool ok() const { return problems.empty(); }
};

// Whether two backends' outputs differ on the judged region (compare/judged_region.h, ValueMatch::
// Bitwise): the units and the row equality that the comparators and explain use. Indexer: top-k indices
// only (scores are informational), a checked row as a set unless ties=strict, -1 in a Q pad row is not
// a write; SDPA: bitwise, a computed NaN equals any other.
bool outputs_differ(const Layout& l, const Outputs& a, const Outputs& b);

// seed_offset is added to every family's seed (0 = the built-in seeds).
SelftestResult run_selftest(const std::vector<LayoutFamily>& families, uint64_t seed_offset = 0);
std::string format_selftest(const SelftestResult& r, bool verbose);

}  // namespace ao

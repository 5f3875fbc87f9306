// No gate is vacuous (docs/tolerances.md, "WEAK"): over the catalog, edge and found corpora and a seeded
// generated sample of every op x pass x values mode, an all-zero answer and a NaN answer of every judged
// output of every case fail it (FAIL), or the case comes out WEAK naming that output; never PASS. The
// answers are built here from the output specs (output_specs(): one per output tensor of every op and
// pass) and judged through the trial, as a backend's run is; an op or output added later is covered by its
// registration alone. Beyond that, the zero answer must FAIL (the gates discriminate) on every case but
// those of kInherentlyWeak, where an honest kernel's own error reaches the gradient's size; restoring the
// backward's old P-rounding floor (lambda u_32 2 L times the norm bounds) makes fp32 values=extreme
// backward cases weak and fails this test. The per op x pass x values table (sampled cases, discriminating,
// weak, the zero answer's smallest err/gate) is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/fuzz/generator.h"
#include "attn_oracle/pipeline/trial.h"

using namespace ao;
namespace fs = std::filesystem;

namespace {

// Where a zero answer may pass a gate honestly, and why (docs/tolerances.md, "WEAK"): the case is WEAK there,
// never PASS. Each class is a mechanism by which an honest kernel's own error reaches the size of the
// gradient; outside them every output must discriminate (restoring the backward's old floor fails this).
struct InherentClass {
  const char* why;
  bool (*holds)(const Case& c, const std::string& output, double zero_ratio);
};
const InherentClass kInherentlyWeak[] = {
    // Keys sharing a large component (SDPA's values=extreme: 2048 in every key; the indexer's clustered:
    // one shared vector): dQ = sum_j dS_ij k_j with sum_j dS_ij ~ 0 shows only the keys' spread, while
    // a kernel that rounds dS to a 16-bit dtype before its dQ product errs by u_d sum_j |dS_ij| |k_j|,
    // through the shared part (numpy tiles of 32, P and dS rounded: dq rel_l2 ~0.6).
    {"16-bit dS through a component the keys share (dq)",
     [](const Case& c, const std::string& o, double) {
       return c.pass == Pass::Bwd && c.dtype != DType::F32 && o == "dq" &&
              ((c.op == Op::Sdpa && c.values == Values::Extreme) || (c.op == Op::Indexer && c.values == Values::Clustered));
     }},
    // SDPA under values=extreme: logits and LSE near 10^6, where fp32's spacing is 0.06-0.125, so P of a
    // row is off by a few percent (the exponent's roundings, the same for every key of the row); a
    // gradient that is a cancelling sum over rows (dV_j = sum_i P_ij dO_i) can be that small. Weak only
    // within a factor 2 of its gate: the old floor, 10x too wide, put zero answers at 0.04-0.3.
    {"P's exponent rounded at |s| ~ 10^6 (values=extreme), zero answer within 2x of the gate",
     [](const Case& c, const std::string&, double zero_ratio) {
       return c.op == Op::Sdpa && c.pass == Pass::Bwd && c.values == Values::Extreme && zero_ratio >= 0.5;
     }},
};

bool inherently_weak(const Case& c, const std::string& output, double zero_ratio) {
  return std::any_of(std::begin(kInherentlyWeak), std::end(kInherentlyWeak),
                     [&](const InherentClass& k) { return k.holds(c, output, zero_ratio); });
}

struct Row {  // one op x pass x values mode of the table
  int cases = 0, discriminating = 0, weak = 0, inherently = 0;
  double min_zero_ratio = std::numeric_limits<double>::infinity();
  std::set<std::string> weak_outputs;
};

std::string mode_key(const Case& c) {
  return fmt::format("{} {} values={}", to_string(c.op), c.pass == Pass::Bwd ? "bwd" : "fwd", to_string(c.values));
}

// The valid judged rows of output o, as rows of its buffer.
std::vector<int64_t> judged_rows(const Layout& l, const JudgedRegion& region, size_t o) {
  const OutputSpec& s = region.outputs()[o];
  if (s.rows == RowBuffer::KV) return region.kv_value_rows();
  std::vector<int64_t> rows;
  for (int64_t r : region.value_rows())
    if (region.judges(o, r) && l.valid_row(r)) rows.push_back(region.buffer_row(o, r));
  return rows;
}

// The answer of one output's valid judged rows replaced by `zero` (0 / key 0) or the NaN answer (NaN / an
// index past the K/V buffer), the other outputs and the pad slots as the exact answer holds them.
Outputs replaced(const Layout& l, const JudgedRegion& region, size_t o, const Outputs& exact, bool zero) {
  Outputs a = exact;
  const OutputSpec& s = region.outputs()[o];
  for (int64_t r : judged_rows(l, region, o))
    for (int64_t e = 0; e < s.width; ++e) {
      const size_t at = size_t(r * s.width + e);
      if (s.floats) (a.*s.floats)[at] = zero ? 0.f : std::numeric_limits<float>::quiet_NaN();
      else (a.*s.indices)[at] = zero ? 0 : int32_t(l.kv_rows);
    }
  return a;
}

// The exact answer is zero on every valid judged cell of o, or below 2^-100 (a sum of terms below fp32's
// normal range, which a kernel built with fast math flushes): the zero answer is then right.
bool all_zero_on_judged(const Layout& l, const JudgedRegion& region, size_t o, const Outputs& exact) {
  const OutputSpec& s = region.outputs()[o];
  for (int64_t r : judged_rows(l, region, o))
    for (int64_t e = 0; e < s.width; ++e) {
      const size_t at = size_t(r * s.width + e);
      if (s.floats ? !(std::fabs((exact.*s.floats)[at]) < 0x1p-100f) : (exact.*s.indices)[at] != 0)
        return false;
    }
  return true;
}

// Judges the zero and NaN answers of every output of c; records the case in the table. Returns the
// problems found (empty: none).
std::vector<std::string> check_case(const Case& c, Backend& ref_backend, std::map<std::string, Row>& table) {
  std::vector<std::string> problems;
  Trial t(c);
  const Layout& l = t.layout();
  TrialRun ref;
  if (comparator_reads_reference(c)) {
    ref = t.run(ref_backend);
    if (!ref.ok()) return {"cpu-ref did not run: " + ref.status.reason};
  }
  // The exact answer the comparator judges against (the indexer's: the reference's top-k).
  const auto prepared = prepare_judgement(l, t.inputs(), ref.out);
  const Outputs& exact = prepared->exact();
  const JudgedRegion region(l);
  auto judge = [&](Outputs out) {
    TrialRun run;
    run.backend = "synthetic";
    run.out = std::move(out);
    run.status = {RunStatus::Ok, "", 0};
    return comparator_reads_reference(c) ? t.judge(run, ref) : t.judge_exact(run);
  };
  const Verdict clean = judge(exact);
  if (clean.kind != Verdict::Pass && clean.kind != Verdict::Weak)
    problems.push_back("the exact answer itself does not pass: " + failing_summary(clean));
  Row& row = table[mode_key(c)];
  ++row.cases;
  bool weak = false, allowed = true;
  for (size_t o = 0; o < region.outputs().size(); ++o) {
    const std::string name = region.outputs()[o].name;
    if (judged_rows(l, region, o).empty()) continue;  // nothing of it is judged: no answer to replace
    const Verdict zero = judge(replaced(l, region, o, exact, true));
    const Verdict nan = judge(replaced(l, region, o, exact, false));
    const auto names = weak_outputs(zero);
    const bool named = std::find(names.begin(), names.end(), name) != names.end();
    const bool right = all_zero_on_judged(l, region, o, exact);  // the zero answer is the exact one
    if (zero.kind == Verdict::Pass && !right)
      problems.push_back(fmt::format("a zero {} PASSES: {}", name, failing_summary(zero)));
    if (zero.kind == Verdict::Weak && !named)
      problems.push_back(fmt::format("a zero {} is WEAK without naming {}: {}", name, name, zero.reason));
    if (!is_failure(nan.kind) && !(nan.kind == Verdict::Weak && std::count(names.begin(), names.end(), name)))
      problems.push_back(fmt::format("a NaN {} is not failed: {} ({})", name, verdict_name(nan.kind), nan.reason));
    // The discrimination check's claim about o agrees with the judgement of the zero answer.
    for (const GateCheck& g : clean.gate_checks)
      if (g.output == name && g.judged > 0 && !right && g.zero_fails != is_failure(zero.kind))
        problems.push_back(fmt::format("the gate check of {} says the zero answer {}, the judgement says {}", name,
                                       g.zero_fails ? "fails" : "passes", verdict_name(zero.kind)));
    if (zero.kind == Verdict::Weak && !right) {
      weak = true;
      row.weak_outputs.insert(name);
      double ratio = -1;
      for (const GateCheck& g : clean.gate_checks)
        if (g.output == name) ratio = g.zero_ratio;
      if (!inherently_weak(c, name, ratio)) allowed = false;
    }
    for (const GateCheck& g : clean.gate_checks)
      if (g.output == name && g.zero_ratio >= 0 && !g.exact_zero) row.min_zero_ratio = std::min(row.min_zero_ratio, g.zero_ratio);
  }
  if (weak) {
    ++row.weak;
    if (allowed) ++row.inherently;
    else problems.push_back("WEAK where the gates must discriminate: " + clean.reason);
  } else {
    ++row.discriminating;
  }
  return problems;
}

void print_table(const std::map<std::string, Row>& table, const char* what) {
  std::cout << fmt::format("vacuity, {}: op pass values | cases | discriminating | weak (of them inherent) | "
                           "zero answer's smallest err/gate | weak outputs\n", what);
  for (const auto& [k, r] : table) {
    std::string outs;
    for (const auto& o : r.weak_outputs) outs += (outs.empty() ? "" : ",") + o;
    std::cout << fmt::format("  {:<30} | {:>4} | {:>4} | {:>3} ({}) | {:>9.3g} | {}\n", k, r.cases, r.discriminating, r.weak,
                             r.inherently, r.min_zero_ratio, outs);
  }
}

std::vector<CaseEntry> corpus_entries() {
  std::vector<std::string> dirs;
  for (const char* d : {"catalog", "edge", "found"}) dirs.push_back((fs::path(AO_SOURCE_DIR) / "corpus" / d).string());
  return read_case_files(collect_case_files(dirs));
}

}  // namespace

TEST(Vacuity, NoCorpusCaseAcceptsAZeroOrNanAnswer) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ref = make_backend("cpu-ref");
  std::map<std::string, Row> table;
  const auto entries = corpus_entries();
  ASSERT_GT(entries.size(), 100u);
  for (const auto& e : entries) {
    const auto problems = check_case(e.c, *ref, table);
    for (const auto& p : problems) ADD_FAILURE() << e.file << ":" << e.line << ": " << print_case(e.c) << ": " << p;
  }
  print_table(table, "corpus/catalog, corpus/edge, corpus/found");
  std::cout << fmt::format("  {:.1f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Cases of the libFuzzer-sized profile (tiny), each op x pass, with every values mode of the op forced
// onto the drawn case; kPerMode cases per mode, the first ones valid under it.
TEST(Vacuity, NoGeneratedCaseAcceptsAZeroOrNanAnswer) {
  constexpr int kPerMode = 12;
  const auto t0 = std::chrono::steady_clock::now();
  auto ref = make_backend("cpu-ref");
  std::map<std::string, Row> table;
  for (Op op : {Op::Sdpa, Op::Indexer})
    for (Pass pass : {Pass::Fwd, Pass::Bwd}) {
      const std::vector<Values> modes = op == Op::Sdpa ? std::vector<Values>{Values::Normal, Values::Extreme}
                                                       : std::vector<Values>{Values::Normal, Values::Extreme,
                                                                             Values::Plateau, Values::Clustered};
      GenOptions gen;
      gen.dims = DimsProfile::Tiny;
      gen.op = op;
      gen.pass = pass;
      for (Values v : modes) {
        int taken = 0;
        for (uint64_t i = 0; taken < kPerMode && i < 20 * kPerMode; ++i) {
          Case c = generate_case(20261207, i, gen);
          c.values = v;
          try {
            (void)make_layout(c, LayoutLimits{}, LayoutMode::Describe);
          } catch (const BadInput&) {
            continue;  // the mode does not go with this layout (probe inputs, ...)
          }
          ++taken;
          for (const auto& p : check_case(c, *ref, table)) ADD_FAILURE() << print_case(c) << ": " << p;
        }
        EXPECT_EQ(taken, kPerMode) << "too few valid cases for " << to_string(op) << " values=" << to_string(v);
      }
    }
  print_table(table, "generated (dims tiny, seed 20261207)");
  std::cout << fmt::format("  {:.1f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

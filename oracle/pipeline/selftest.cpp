// The kill matrix (see selftest.h): bug models x layout families, observability by bitwise output
// comparison against cpu-ref, detection by the comparators.
#include "attn_oracle/pipeline/selftest.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/bug_models.h"
#include "attn_oracle/case/enum_names.h"
#include "attn_oracle/compare/judged_region.h"
#include "attn_oracle/pipeline/trial.h"

namespace ao {

const std::vector<LayoutFamily>& selftest_families() {
  static const std::vector<LayoutFamily> f = {
      // Indexer: zigzag CP (a rank's two chunks), multi-document packs, padding, short rows, ties.
      {"cp-first", "op=indexer docs=1024 cp=4 rank=0 topk=64 seed=11"},
      {"cp-middle", "op=indexer docs=1024 cp=4 rank=1 topk=64 seed=12"},
      {"cp-last", "op=indexer docs=1024 cp=4 rank=3 topk=64 seed=13"},
      {"cp-multidoc", "op=indexer docs=512,256 cp=4 rank=2 topk=32 seed=14"},
      {"cp-padded", "op=indexer docs=70,200 pad=58,56 cp=4 rank=3 topk=16 seed=15"},
      {"thd-packed", "op=indexer docs=100,37,200 topk=48 seed=16"},
      {"thd-padded", "op=indexer docs=100,37,200 pad=5,0,11 tail=40 topk=48 seed=17"},
      {"te-idx", "op=indexer lens=3,2,4 padded_offsets=0,4,8,13 topk=4 seed=18"},
      {"short-rows", "op=indexer docs=40,25 topk=64 seed=19"},
      {"ties", "op=indexer docs=300 levels=3 topk=32 seed=20"},
      {"ratio", "op=indexer docs=512 ratio=4 topk=32 seed=21"},
      // SDPA: TE's padded example, Q/O padding != K/V padding, GQA, bottom-right, NaN tails, CP, decode.
      {"te-sdpa", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"},
      {"te-realpad", "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 poison=none seed=30"},  // identifier tokens hold data
      {"qkv-pad", "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 seed=31"},
      {"gqa", "op=sdpa docs=70,50 hq=8 hkv=2 seed=32"},
      {"bottomright", "op=sdpa q_lens=20,7 kv_lens=50,30 mask=bottomright seed=33"},
      {"nan-tails", "op=sdpa docs=100,37 pad=11 tail=64 poison=nan seed=34"},
      {"sdpa-packed", "op=sdpa docs=100,37,90 hq=4 hkv=4 seed=35"},
      {"sdpa-cp", "op=sdpa docs=256 cp=4 rank=1 seed=36"},
      {"decode", "op=sdpa q_lens=1,1,1 kv_lens=40,17,64 mask=bottomright hq=8 hkv=2 seed=37"},
      {"window", "op=sdpa docs=200 window=16 dtype=fp32 seed=38"},
      // Long rows (>= 4k keys each): one wrong key moves O by ~1/4000, below a fixed tolerance; the
      // derived gates (tolerance.cpp) must still see it. rows= keeps them cheap.
      {"long-bf16", "op=sdpa q_lens=40,40 kv_lens=4100,4300 mask=bottomright hq=4 hkv=2 rows=24 seed=39"},
      {"long-fp16", "op=sdpa docs=8512 cp=32 rank=31 hq=4 hkv=2 dtype=fp16 rows=24 seed=40"},
      {"cp-window", "op=sdpa docs=256 cp=4 rank=1 window=16 seed=41"},
      {"decode-none", "op=sdpa q_lens=1,1,1 kv_lens=40,17,300 mask=none tail=256 seed=42"},
      {"two-sided", "op=sdpa docs=200 window=16 window_right=8 seed=43"},
      {"fa-causal", "op=sdpa docs=100,37 window=-1 window_right=0 window_convention=fa seed=44"},
      {"br-clamp", "op=sdpa q_lens=200,30 kv_lens=40,64 mask=bottomright window_right=200 max_seqlen_kv=128 seed=45"},
      {"max-seqlen", "op=sdpa docs=128,128 max_seqlen_kv=256 seed=46"},
      {"empty-rows", "op=sdpa q_lens=30,12 kv_lens=10,40 mask=bottomright hq=4 hkv=2 seed=41"},  // q > kv
      {"neg-logits", "op=sdpa docs=40,24 scale=1e6 dtype=fp32 seed=42"},  // rows whose logits are all < -5e4
      {"split-empty", "op=sdpa q_lens=12,30 kv_lens=40,10 mask=bottomright hq=4 hkv=2 num_splits=2 seed=43"},
      {"split-decode", "op=sdpa q_lens=1,1,1 kv_lens=40,17,64 mask=bottomright hq=8 hkv=2 num_splits=3 seed=44"},
      // The SDPA backward (pass=bwd): pad slots and GQA, saved LSE at its own offsets, CP partials, rows
      // without keys, a Q buffer past the scaled dQ accumulator wrap.
      {"bwd-gqa", "op=sdpa pass=bwd docs=50,30 pad=3 hq=4 hkv=2 dim=16 seed=50"},
      {"bwd-stats", "op=sdpa pass=bwd docs=40,40 hq=2 dim=16 stats_offsets=0,64,104 seed=51"},
      {"bwd-cp", "op=sdpa pass=bwd docs=64,32 cp=2 rank=0 hq=2 dim=16 seed=52"},
      {"bwd-empty", "op=sdpa pass=bwd q_lens=70 kv_lens=40 mask=bottomright hq=2 dim=16 seed=53"},
      {"bwd-wrap", "op=sdpa pass=bwd docs=16*2100 hq=2 dim=16 rows=256 seed=54"},
      {"bwd-unreached", "op=sdpa pass=bwd q_lens=0,40 kv_lens=40,40 hq=2 dim=16 seed=55"},  // keys no row reaches
      {"bwd-kvpad", "op=sdpa pass=bwd docs=30,20 q_pad=0 kv_pad=3 mask=bottomright hq=2 dim=16 seed=56"},  // K/V pads only
      // Catalog section A triggers: a long row of a document not at buffer row 0, decode
      // documents of a compressed indexer, scores below -65504, a ReLU zero plateau at the k-th score.
      {"idx-long-row", "op=indexer q_lens=8,8 kv_lens=2000,4600 topk=16 seed=41"},
      {"idx-decode-ratio", "op=indexer q_lens=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 kv_lens=100,100,100,100,100,100,100,100,"
                           "100,100,100,100,100,100,100,100 ratio=4 topk=30 seed=42"},
      {"idx-neg-scores", "op=indexer docs=40 mask=none topk=32 scale=100000 seed=43"},
      {"idx-plateau", "op=indexer q_lens=4 kv_lens=20000 heads=1 topk=4096 seed=44"},
      {"idx-strict-ties", "op=indexer docs=300 levels=3 dim=64 topk=32 ties=strict seed=45"},
      {"idx-chunk", "op=indexer q_lens=64,64 kv_lens=320,400 start_pos=256 topk=32 seed=46"},
      {"idx-extreme", "op=indexer docs=300 mask=none topk=32 values=extreme seed=47"},
      {"idx-clustered", "op=indexer q_lens=4 kv_lens=12000 topk=512 values=clustered seed=48"},
      // The indexer's backward (pass=bwd): a zigzag rank (a key selected by both chunks), short rows with
      // -1 slots before a K tail, a padded pack under a valid-row mean and a scale, integer inputs (q.k = 0),
      // logits far apart (predictions that underflow to 0).
      {"bwd-cp", "op=indexer pass=bwd docs=1024 cp=4 rank=3 topk=64 seed=50"},
      {"bwd-short", "op=indexer pass=bwd docs=40,25 tail=8 topk=64 seed=51"},
      {"bwd-packed", "op=indexer pass=bwd docs=100,37,200 pad=5,0,11 loss_mean=valid scale=0.25 topk=16 seed=52"},
      {"bwd-levels", "op=indexer pass=bwd docs=120 dim=4 levels=2 topk=16 seed=53"},
      {"bwd-wide", "op=indexer pass=bwd docs=200 topk=16 scale=200 seed=54"},  // predictions that underflow to 0
  };
  return f;
}

const char* cell_name(CellKind k) {
  switch (k) {
    case CellKind::Detected: return "detected";
    case CellKind::Missed: return "MISSED";
    case CellKind::NotObservable: return "n/a";
    case CellKind::Skip: return "skip";
    case CellKind::FalseFail: return "FALSEFAIL";
    default: return "ERROR";
  }
}

bool outputs_differ(const Layout& l, const Outputs& a, const Outputs& b) {
  return JudgedRegion(l).any_differs(a, b);
}

namespace {

// How a model's run on a family went, for the diagnosis: not run (skipped, errored), equal to cpu-ref's
// outputs on the judged region, or different (then its run is kept).
enum class ModelRun : char { None, Equal, Differs };

// The diagnosis matrix's column f (selftest.h): explain every Detected model of the family against
// the runs the kill matrix made (bitwise; models equal to cpu-ref enter with no outputs).
void diagnose_family(const Layout& l, const Outputs& ref, const std::string& family, size_t f,
                     const std::vector<TrialRun>& kept, const std::vector<ModelRun>& ran, SelftestResult& res) {
  const JudgedRegion region(l, ValueMatch::Bitwise);
  const auto& models = bug_models();
  std::vector<ModelOutputs> cands;
  std::map<std::string, const Outputs*> outs;
  for (size_t b = 0; b < models.size(); ++b) {
    if (ran[b] == ModelRun::None) continue;
    const Outputs* o = ran[b] == ModelRun::Differs ? &kept[b].out : nullptr;
    cands.push_back({models[b].name, models[b].catalog, o,
                     o ? region.differs(*o, ref) : std::vector<char>(region.size(), 0)});
    outs[models[b].name] = o;
  }
  for (size_t b = 0; b < models.size(); ++b) {
    if (res.cells[b][f].kind != CellKind::Detected) continue;
    size_t c = 0;
    while (cands[c].model != models[b].name) ++c;
    const Explanation e = explain_outputs(region, kept[b].out, ref, cands, cands[c].diff);
    auto& d = res.diagnosis[b][f] = diagnose(l, e, models[b].name, outs);
    if (d.kind == DiagnosisKind::Wrong)
      res.problems.push_back(fmt::format("explain misdiagnoses {} on {}: {}", res.models[b], family, e.headline()));
  }
}

}  // namespace

const char* diagnosis_name(DiagnosisKind k) {
  switch (k) {
    case DiagnosisKind::Named: return "named";
    case DiagnosisKind::Equivalent: return "equiv";
    case DiagnosisKind::Wrong: return "WRONG";
    default: return "-";
  }
}

DiagnosisCell diagnose(const Layout& l, const Explanation& e, const std::string& injected,
                       const std::map<std::string, const Outputs*>& outs) {
  DiagnosisCell d{DiagnosisKind::Wrong, e.n_best ? "" : e.headline()};
  for (const auto& b : e.best()) d.best += (d.best.empty() ? "" : " = ") + b;
  if (e.outcome != Explanation::Explained) return d;
  auto find = [&](const std::string& m) -> const Outputs* {
    auto it = outs.find(m);
    return it == outs.end() ? nullptr : it->second;
  };
  const Outputs* inj = find(injected);
  for (size_t i = 0; i < e.n_best; ++i)
    if (e.ranked[i].model == injected) {
      d.kind = DiagnosisKind::Named;
      return d;
    }
  for (size_t i = 0; i < e.n_best; ++i) {
    const Outputs* o = find(e.ranked[i].model);
    if (inj && o && !outputs_differ(l, *o, *inj)) d.kind = DiagnosisKind::Equivalent;
  }
  return d;
}

SelftestResult run_selftest(const std::vector<LayoutFamily>& families, uint64_t seed_offset) {
  SelftestResult res;
  res.families = families;
  for (const auto& m : bug_models()) res.models.push_back("cpu-bug:" + m.name);
  res.cells.assign(res.models.size(), std::vector<SelftestCell>(families.size()));
  res.diagnosis.assign(res.models.size(), std::vector<DiagnosisCell>(families.size()));
  std::set<std::string> gated;
  auto ref_backend = make_backend("cpu-ref");

  for (size_t f = 0; f < families.size(); ++f) {
    Case c = parse_case(families[f].case_line);
    c.seed += seed_offset;
    Trial t(c);
    const Layout& l = t.layout();
    const TrialRun ref = t.run(*ref_backend);
    if (!ref.ok()) {
      res.ref.push_back(Verdict::Error);
      res.problems.push_back(fmt::format("cpu-ref did not run on {}: {}", families[f].name, ref.status.reason));
      continue;
    }
    // cpu-ref must pass against itself, and a second run must be bit-identical (deterministic).
    const TrialRun ref2 = t.run(*ref_backend);
    const Verdict rv = t.judge(ref2, ref);
    res.ref.push_back(rv.kind);
    if (rv.kind != Verdict::Pass)
      res.problems.push_back(fmt::format("cpu-ref {} on {} ({})", rv.kind == Verdict::Weak ? "is weak" : "fails",
                                         families[f].name, rv.reason));
    if (outputs_differ(l, ref2.out, ref.out))
      res.problems.push_back(fmt::format("cpu-ref is not deterministic on {}", families[f].name));
    for (const auto& m : rv.metrics)
      if (!m.rule.empty()) gated.insert(fmt::format("{}:{}", to_string(c.op), m.name));

    // The diagnosis reuses these runs: the outputs of every model that differs from cpu-ref here.
    std::vector<TrialRun> kept(res.models.size());
    std::vector<ModelRun> ran(res.models.size(), ModelRun::None);
    for (size_t b = 0; b < res.models.size(); ++b) {
      auto& cell = res.cells[b][f];
      auto be = make_backend(res.models[b]);
      TrialRun got = t.run(*be);
      if (got.status.kind == RunStatus::Skipped) {
        cell = {CellKind::Skip, got.status.reason};
        continue;
      }
      if (got.status.kind == RunStatus::Error) {
        cell = {CellKind::Error, got.status.reason};
        res.problems.push_back(fmt::format("{} errored on {}: {}", res.models[b], families[f].name, got.status.reason));
        continue;
      }
      const bool observable = outputs_differ(l, got.out, ref.out);
      const Verdict v = t.judge(got, ref);
      ran[b] = observable ? ModelRun::Differs : ModelRun::Equal;
      if (observable) kept[b] = std::move(got);
      const bool failed = is_failure(v.kind);  // a weak verdict failed no metric
      if (observable && failed) {
        cell = {CellKind::Detected, v.reason};
        for (const auto& m : v.metrics)
          if (m.failed) res.killed_by[fmt::format("{}:{}", to_string(c.op), m.name)].push_back(res.models[b]);
      } else if (observable) {
        cell = {CellKind::Missed, "outputs differ from cpu-ref but every metric passed"};
        res.problems.push_back(fmt::format("{} MISSED on {} ({})", res.models[b], families[f].name, print_case(c)));
      } else if (failed) {
        cell = {CellKind::FalseFail, v.reason};
        res.problems.push_back(fmt::format("{} failed on {} although its outputs equal cpu-ref's ({})", res.models[b],
                                           families[f].name, v.reason));
      } else {
        cell = {CellKind::NotObservable, ""};
      }
    }
    diagnose_family(l, ref.out, families[f].name, f, kept, ran, res);
  }
  for (size_t b = 0; b < res.models.size(); ++b) {
    bool any = false;
    for (const auto& cell : res.cells[b]) any |= cell.kind == CellKind::Detected || cell.kind == CellKind::Missed;
    if (!any) res.problems.push_back(fmt::format("{} is observable on none of its families", res.models[b]));
  }
  for (const auto& g : gated)
    if (!res.killed_by.count(g)) res.problems.push_back(fmt::format("gated metric {} is failed by no bug model", g));
  return res;
}

std::string format_selftest(const SelftestResult& r, bool verbose) {
  std::string s = "kill matrix: bug model x layout family (detected / MISSED / n/a = not observable / skip = not "
                  "defined for the op)\n\n";
  size_t w0 = 8;
  for (const auto& m : r.models) w0 = std::max(w0, m.size());
  s += fmt::format("{:<{}}", "", w0);
  for (size_t f = 0; f < r.families.size(); ++f) s += fmt::format(" {:>9}", fmt::format("F{:02}", f + 1));
  s += fmt::format("\n{:<{}}", "cpu-ref", w0);
  for (auto k : r.ref) s += fmt::format(" {:>9}", k == Verdict::Pass ? "pass" : k == Verdict::Weak ? "WEAK" : "FAIL");
  s += "\n";
  for (size_t b = 0; b < r.models.size(); ++b) {
    s += fmt::format("{:<{}}", r.models[b], w0);
    for (const auto& cell : r.cells[b]) s += fmt::format(" {:>9}", cell_name(cell.kind));
    s += "\n";
  }
  s += "\ndiagnosis matrix: explain on each detected cell names the injected model (named), an output-equivalent "
       "one (equiv), or another (WRONG); - = not a detected cell\n\n";
  s += fmt::format("{:<{}}", "", w0);
  for (size_t f = 0; f < r.families.size(); ++f) s += fmt::format(" {:>9}", fmt::format("F{:02}", f + 1));
  s += "\n";
  int64_t named = 0, equiv = 0, wrong = 0;
  for (size_t b = 0; b < r.models.size() && b < r.diagnosis.size(); ++b) {
    s += fmt::format("{:<{}}", r.models[b], w0);
    for (const auto& d : r.diagnosis[b]) {
      s += fmt::format(" {:>9}", diagnosis_name(d.kind));
      named += d.kind == DiagnosisKind::Named;
      equiv += d.kind == DiagnosisKind::Equivalent;
      wrong += d.kind == DiagnosisKind::Wrong;
    }
    s += "\n";
  }
  s += fmt::format("diagnosis: {} named, {} output-equivalent, {} wrong\n", named, equiv, wrong);
  s += "\nfamilies:\n";
  for (size_t f = 0; f < r.families.size(); ++f)
    s += fmt::format("  F{:02} {:<12} {}\n", f + 1, r.families[f].name, r.families[f].case_line);
  s += "\ngated metric -> bug models that fail it:\n";
  for (const auto& [metric, models] : r.killed_by) {
    std::set<std::string> uniq(models.begin(), models.end());
    std::string list;
    for (const auto& m : uniq) list += fmt::format("{}{}", list.empty() ? "" : ", ", m.substr(8));
    s += fmt::format("  {:<30} {}\n", metric, list);
  }
  if (verbose) {
    s += "\ncells:\n";
    for (size_t b = 0; b < r.models.size(); ++b)
      for (size_t f = 0; f < r.families.size(); ++f) {
        const auto& cell = r.cells[b][f];
        if (cell.kind == CellKind::NotObservable || cell.kind == CellKind::Skip) continue;
        s += fmt::format("  {:<28} F{:02} {:<9} {}\n", r.models[b], f + 1, cell_name(cell.kind), cell.detail);
        if (b < r.diagnosis.size() && r.diagnosis[b][f].kind != DiagnosisKind::None)
          s += fmt::format("  {:<28}     explain   {} ({})\n", "", r.diagnosis[b][f].best,
                           diagnosis_name(r.diagnosis[b][f].kind));
      }
  }
  s += "\n";
  if (r.ok()) {
    s += "selftest: PASS (every observable bug detected and diagnosed, cpu-ref passes everywhere, every gated metric "
         "killed)\n";
  } else {
    s += "selftest: FAIL\n";
    for (const auto& p : r.problems) s += fmt::format("  - {}\n", p);
  }
  return s;
}

}  // namespace ao

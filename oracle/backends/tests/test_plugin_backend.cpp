// plugin: backend: the CPU example plugin (oracle/tests/plugins/example_plugin.cpp) must pass on fresh
// random cases; its bug knob / env var must be caught; every load and run failure must be a clear error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/pipeline/trial.h"
#include "cli_run.h"
#include "temp_files.h"

using namespace ao;
using test::TempDir;

namespace {

CaseResult run_plugin(const std::string& spec, const std::string& line) {
  auto be = make_backend(spec);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

std::string load_error(const std::string& spec) {
  try {
    make_backend(spec);
  } catch (const BadInput& e) {
    EXPECT_EQ(e.key, "backend");
    return e.what();
  }
  ADD_FAILURE() << spec << " loaded";
  return {};
}

const std::string kPlugin = std::string("plugin:") + AO_EXAMPLE_PLUGIN;
const char* kIdxCp = "op=indexer docs=512,256 cp=4 rank=2 heads=4 dim=32 topk=16 seed=";
const char* kSdpa = "op=sdpa lens=37,5,64 q_pad=3,0,2 kv_pad=0,6,1 hq=4 hkv=2 dim=32 mask=bottomright seed=";

}  // namespace

TEST(Plugin, ExamplePassesOnFreshCases) {
  const unsigned seed = std::random_device{}() % 100000;
  SCOPED_TRACE(fmt::format("seed={}", seed));
  for (const std::string& line :
       {std::string(kIdxCp) + std::to_string(seed), std::string(kSdpa) + std::to_string(seed),
        std::string("op=sdpa docs=64,128 cp=2 rank=1 hq=2 hkv=1 dim=16 window=20 dtype=fp16 seed=") + std::to_string(seed),
        std::string("op=indexer docs=300 pad=4 heads=2 dim=16 topk=400 ratio=2 dtype=fp32 seed=") + std::to_string(seed),
        // ABI v2's conventions: a right window bound, FlashAttention's left bound, +inf LSE of empty rows,
        // strict top-k ties.
        "op=sdpa q_lens=40,9 kv_lens=30,60 mask=bottomright window=5 window_right=3 window_convention=fa "
        "empty_rows=posinf hq=2 hkv=1 dim=16 seed=" + std::to_string(seed),
        "op=indexer docs=200 heads=2 dim=16 topk=24 ties=strict levels=4 seed=" + std::to_string(seed)}) {
    auto r = run_plugin(kPlugin, line);
    EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
    EXPECT_EQ(r.backend_version, "example-cpu-plugin 1 (fp64 loops)");
  }
}

// ABI v2 hands the backward's tensors (dO, the forward's O and LSE; the indexer's forward top-k, target,
// predict, grad_loss) and takes the gradients back: the example's fp64 backward passes the gates on
// padded THD, GQA, windows, CP ranks (dK/dV and d_index_k partials) and every loss_mean.
TEST(Plugin, ExampleBackwardPassesOnFreshCases) {
  const unsigned seed = std::random_device{}() % 100000;
  SCOPED_TRACE(fmt::format("seed={}", seed));
  for (const std::string& line :
       {std::string(kSdpa) + std::to_string(seed) + " pass=bwd",
        "op=sdpa pass=bwd docs=64,128 cp=2 rank=1 hq=4 hkv=1 dim=16 window=20 dtype=fp16 seed=" + std::to_string(seed),
        "op=sdpa pass=bwd q_lens=16,1 kv_lens=40,9 q_pad=2,0 kv_pad=0,3 tail=5 mask=bottomright hq=2 hkv=2 dim=16 "
        "dtype=fp32 seed=" + std::to_string(seed),
        std::string(kIdxCp) + std::to_string(seed) + " pass=bwd",
        "op=indexer pass=bwd docs=300 pad=4 heads=2 dim=16 topk=40 ratio=2 loss_mean=keyed dtype=fp32 seed=" +
            std::to_string(seed),
        "op=indexer pass=bwd docs=100,60 heads=4 dim=16 topk=8 loss_mean=sum seed=" + std::to_string(seed)}) {
    auto r = run_plugin(kPlugin, line);
    EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
    // Gradient rows were judged (a pass also means none was left unwritten).
    const Metric* rows = r.verdict.find("rows_checked");
    ASSERT_NE(rows, nullptr) << line;
    EXPECT_GT(rows->value, 0.0) << line;
  }
}

// A library built against ABI v1 keeps running forward cases (it is handed v1's layout prefix); a backward
// case, or one with a convention v1's layout cannot say, is declined before any library code runs.
TEST(Plugin, AbiV1LibraryRunsForwardAndDeclinesBackward) {
  const std::string v1 = std::string("plugin:") + AO_EXAMPLE_PLUGIN_ABI1;
  const auto fwd = run_plugin(v1, std::string(kSdpa) + "3");
  EXPECT_EQ(fwd.verdict.kind, Verdict::Pass) << format_result(fwd);
  for (const auto& [line, key] : std::vector<std::pair<std::string, std::string>>{
           {"op=sdpa pass=bwd docs=30,20 hq=2 dim=16", "pass=bwd"},
           {"op=indexer pass=bwd docs=40 heads=2 dim=8 topk=4", "pass=bwd"},
           {"op=sdpa docs=30,20 window_right=4 hq=2 dim=16", "window_right"},
           {"op=sdpa docs=30,20 window=4 window_convention=fa hq=2 dim=16", "window_convention=fa"},
           {"op=sdpa q_lens=3 kv_lens=0 mask=bottomright empty_rows=posinf hq=2 dim=16", "empty_rows=posinf"},
           {"op=indexer docs=40 heads=2 dim=8 topk=4 ties=strict", "ties=strict"}}) {
    const auto r = run_plugin(v1, line);
    EXPECT_EQ(r.verdict.kind, Verdict::Skipped) << format_result(r);
    EXPECT_NE(r.verdict.reason.find("ABI v1, whose layout and tensors cannot carry " + key), std::string::npos)
        << r.verdict.reason;
    // The same case runs on the v2 library (the key reaches it) and passes.
    const auto v2 = run_plugin(kPlugin, line);
    EXPECT_EQ(v2.verdict.kind, Verdict::Pass) << format_result(v2);
  }
}

// The plugin's backward defects carry the cpu-bug models' ids and fail the same metrics on the same case.
TEST(Plugin, BackwardBugKnobsFailLikeTheirCpuModels) {
  for (const auto& [bug, line] :
       {std::pair<std::string, std::string>{"bwd-gqa-first-head", "op=sdpa pass=bwd docs=50,30 hq=4 hkv=2 dim=16 seed=7"},
        {"dk-overwrite", "op=indexer pass=bwd docs=300 heads=4 dim=16 topk=32 seed=7"},
        {"topleft-cp", "op=sdpa pass=bwd docs=64,128 cp=2 rank=1 hq=2 hkv=1 dim=16 seed=7"}}) {
    SCOPED_TRACE(bug);
    const auto plug = run_plugin(kPlugin + ":bug=" + bug, line);
    const auto model = run_plugin("cpu-bug:" + bug, line);
    ASSERT_EQ(plug.verdict.kind, Verdict::Fail) << format_result(plug);
    ASSERT_EQ(model.verdict.kind, Verdict::Fail) << format_result(model);
    EXPECT_EQ(failing_metrics(plug.verdict), failing_metrics(model.verdict));
  }
  const auto nan = run_plugin(kPlugin + ":fail=nan", "op=sdpa pass=bwd docs=30,20 hq=2 dim=16 seed=3");
  ASSERT_EQ(nan.verdict.kind, Verdict::Fail) << format_result(nan);
  EXPECT_TRUE(nan.verdict.find("dq_nonfinite_valid") && nan.verdict.find("dq_nonfinite_valid")->failed)
      << format_result(nan);
}

// The oracle holds plugin knobs to the one grammar: `bug=` takes the cpu-bug ids only, foreign knobs keep
// the naming rule, and the old spelling reads as the canonical one (the name says which).
TEST(Plugin, KnobsFollowTheGrammarAndBugIsADefectId) {
  for (const char* knobs : {":bug=nope", ":bug=", ":Fail=nan", ":fail", ":fail=nan,fail=skip"}) {
    try {
      make_backend(kPlugin + knobs);
      ADD_FAILURE() << knobs << " accepted";
    } catch (const BadInput& e) {
      EXPECT_EQ(e.key, "backend");
      EXPECT_EQ(e.value, kPlugin + knobs);
    }
  }
  EXPECT_NE(load_error(kPlugin + ":bug=nope").find("knob bug: value 'nope' must be none|topleft-cp|"), std::string::npos);
  EXPECT_EQ(make_backend(kPlugin + ":bug=topleft")->name(), kPlugin + ":bug=topleft-cp");  // old spelling
  auto old = run_plugin(kPlugin + ":bug=topleft", std::string(kIdxCp) + "5");               // old spelling
  EXPECT_EQ(old.verdict.kind, Verdict::Fail) << format_result(old);
  // A valid id the library does not re-create is its error, never a silent pass.
  auto other = run_plugin(kPlugin + ":bug=fill-zero", std::string(kIdxCp) + "5");
  EXPECT_EQ(other.verdict.kind, Verdict::Error) << format_result(other);
  EXPECT_NE(other.verdict.reason.find("bug=fill-zero"), std::string::npos) << other.verdict.reason;
}

TEST(Plugin, BugKnobAndEnvVarAreCaught) {
  auto k = run_plugin(kPlugin + ":bug=topleft-cp", std::string(kIdxCp) + "3");
  EXPECT_EQ(k.verdict.kind, Verdict::Fail) << format_result(k);
  ::setenv("AO_EXAMPLE_PLUGIN_BUG", "topleft-cp", 1);
  auto e = run_plugin(kPlugin, std::string("op=sdpa docs=128 cp=2 rank=0 hq=2 hkv=2 dim=16 seed=4"));
  ::unsetenv("AO_EXAMPLE_PLUGIN_BUG");
  EXPECT_EQ(e.verdict.kind, Verdict::Fail) << format_result(e);
}

TEST(Plugin, RunFailuresAreBackendErrorsOrSkips) {
  auto err = run_plugin(kPlugin + ":fail=error", std::string(kIdxCp) + "1");
  EXPECT_EQ(err.verdict.kind, Verdict::Error);
  EXPECT_NE(err.verdict.reason.find("plugin error: planted failure (knob fail=error) on case: op=indexer"),
            std::string::npos)
      << err.verdict.reason;
  auto skip = run_plugin(kPlugin + ":fail=skip", std::string(kIdxCp) + "1");
  EXPECT_EQ(skip.verdict.kind, Verdict::Skipped);
  EXPECT_NE(skip.verdict.reason.find("planted decline"), std::string::npos) << skip.verdict.reason;
  ::setenv("AO_EXAMPLE_PLUGIN_UNAVAILABLE", "1", 1);
  auto un = run_plugin(kPlugin, std::string(kIdxCp) + "1");
  ::unsetenv("AO_EXAMPLE_PLUGIN_UNAVAILABLE");
  EXPECT_EQ(un.verdict.kind, Verdict::Skipped);
  EXPECT_NE(un.verdict.reason.find("pretending no device"), std::string::npos) << un.verdict.reason;
}

TEST(Plugin, NanOutputIsContamination) {
  auto r = run_plugin(kPlugin + ":fail=nan", std::string(kSdpa) + "2");
  ASSERT_EQ(r.verdict.kind, Verdict::Fail) << format_result(r);
  const Metric* m = r.verdict.find("nonfinite_valid");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->failed);
}

TEST(PluginLoad, AbiMismatchMissingSymbolAndBadFilesAreNamed) {
  const std::string abi = load_error(std::string("plugin:") + AO_EXAMPLE_PLUGIN_ABI99);
  EXPECT_NE(abi.find("plugin ABI version 99 but this harness speaks versions 1 to 2"), std::string::npos) << abi;
  const std::string norun = load_error(std::string("plugin:") + AO_EXAMPLE_PLUGIN_NORUN);
  EXPECT_NE(norun.find("missing required symbol 'ao_plugin_run'"), std::string::npos) << norun;
  const std::string missing = load_error("plugin:/nonexistent/libkernel.so");
  EXPECT_NE(missing.find("no such library file '/nonexistent/libkernel.so'"), std::string::npos) << missing;
  const auto junk = std::filesystem::temp_directory_path() / fmt::format("ao-not-a-lib-{}.so", ::getpid());
  std::ofstream(junk) << "this is not an ELF file\n";
  const std::string bad = load_error("plugin:" + junk.string());
  std::filesystem::remove(junk);
  EXPECT_NE(bad.find("dlopen failed"), std::string::npos) << bad;
  // A library that is not a plugin at all (libc): the ABI symbol is missing.
  const std::string libc = load_error("plugin:/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(libc.find("missing required symbol 'ao_plugin_abi_version'") != std::string::npos ||
              libc.find("no such library file") != std::string::npos)
      << libc;
  EXPECT_NE(make_backend("plugin")->unavailable_reason().find("needs a library"), std::string::npos);
}

TEST(PluginCli, ExitCodes) {
  const std::string base = std::string(AO_CLI) + " repro " + kIdxCp + "5 --backend " + kPlugin;
  EXPECT_EQ(WEXITSTATUS(std::system((base + " >/dev/null").c_str())), 0);
  EXPECT_EQ(WEXITSTATUS(std::system((base + ":bug=topleft-cp >/dev/null").c_str())), 1);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(AO_CLI) + " repro " + kIdxCp + "5 --backend plugin:" +
                                     AO_EXAMPLE_PLUGIN_ABI99 + " >/dev/null 2>&1").c_str())),
            2);
}

// A real `git bisect run` over a throwaway repo of plugin sources (scripts/tools/bisect.sh --plugin-demo):
// the library is rebuilt at each commit; the injected bad commit is named, and a commit that does not
// build, one built against another ABI version and one that crashes each map to 125 (skip).
TEST(PluginBisect, GitBisectRunNamesTheInjectedCommit) {
  if (std::system("command -v git >/dev/null && command -v c++ >/dev/null") != 0)
    GTEST_SKIP() << "git and a C++ compiler are needed to rebuild the plugin at each commit";
  const std::string cmd = std::string("AO=") + AO_CLI + " bash " + AO_SOURCE_DIR + "/scripts/tools/bisect.sh --plugin-demo 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("commit 3: simplify row positions (drops q_causal_offsets)"), std::string::npos) << out;
  EXPECT_NE(out.find("demo: bisect named the commit that introduced the bug"), std::string::npos) << out;
  EXPECT_NE(out.find("commit 5: work in progress (does not build) -> exit 125: skip: build failed"), std::string::npos) << out;
  EXPECT_NE(out.find("commit 6: builds, but against ABI 7 -> exit 125"), std::string::npos) << out;
  EXPECT_NE(out.find("plugin ABI version 7 but this harness speaks versions 1 to 2"), std::string::npos) << out;
  EXPECT_NE(out.find("commit 7: debug assert (crashes) -> exit 125"), std::string::npos) << out;
}

// ---- hostile plugins (plugins/hostile_plugin.cpp): every plugin code path runs in a supervised child ----

namespace {

struct HostileMode {
  const char* mode;
  Verdict::Kind kind;
  const char* cause;  // what the reason (and the CLI output) must say
};

void PrintTo(const HostileMode& m, std::ostream* os) { *os << m.mode; }

std::string hostile(const std::string& mode) {
  return std::string("plugin:") + AO_HOSTILE_PLUGIN_DIR + "/libao_hostile_plugin_" + mode + ".so";
}

// AO_PLUGIN_TIMEOUT for the test's duration (the endless loop must end quickly).
struct PluginTimeout {
  explicit PluginTimeout(const char* s) { ::setenv("AO_PLUGIN_TIMEOUT", s, 1); }
  ~PluginTimeout() { ::unsetenv("AO_PLUGIN_TIMEOUT"); }
};

const HostileMode kHostile[] = {
    {"exit_run", Verdict::Error, "exited without a verdict (exit status 0) during ao_plugin_run"},
    {"underscore_exit_run", Verdict::Error, "exited without a verdict (exit status 0) during ao_plugin_run"},
    {"exit_ctor", Verdict::Error, "exited without a verdict (exit status 0) during loading"},
    {"segv", Verdict::Error, "crashed (signal 11"},
    {"abort", Verdict::Error, "crashed (signal 6"},
    {"stack", Verdict::Error, "crashed (signal 11"},
    {"loop", Verdict::Error, "timed out after 1 s during ao_plugin_run"},
    {"abi_data", Verdict::Error, "symbol 'ao_plugin_abi_version' is not a function"},
    {"msg_nonul", Verdict::Error, "plugin error: AAAAAAAA"},
    {"zero_inputs", Verdict::Fail, "tie_aware_recall_min"},
};

class PluginHostile : public ::testing::TestWithParam<HostileMode> {};

}  // namespace

TEST_P(PluginHostile, IsAnErrorOfTheBackendNeverAPassOrADeadHarness) {
  const auto& m = GetParam();
  PluginTimeout t("1");
  const unsigned seed = std::random_device{}() % 100000;
  SCOPED_TRACE(fmt::format("seed={}", seed));
  auto r = run_plugin(hostile(m.mode), std::string("op=indexer docs=512,256 cp=4 rank=2 seed=") + std::to_string(seed));
  EXPECT_EQ(r.verdict.kind, m.kind) << format_result(r);
  const std::string what = m.kind == Verdict::Fail ? format_result(r) : r.verdict.reason;
  EXPECT_NE(what.find(m.cause), std::string::npos) << what;
  if (m.kind == Verdict::Error && std::string(m.cause).rfind("plugin error", 0) != 0) {  // the harness's words
    EXPECT_NE(what.find("libao_hostile_plugin_" + std::string(m.mode) + ".so"), std::string::npos) << what;
  }
}

TEST_P(PluginHostile, ReproGateAndFuzzExitOneNamingTheCause) {
  const auto& m = GetParam();
  const std::string spec = hostile(m.mode);
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ao-hostile-{}-{}", m.mode, ::getpid());
  std::filesystem::create_directories(dir);
  const std::string line = "op=indexer docs=512,256 cp=4 rank=2 seed=5";
  std::ofstream(dir / "hostile.case") << line << "\n";
  const std::string env = "AO_PLUGIN_TIMEOUT=1 ";
  for (const std::string& cmd :
       {"repro " + line + " --backend " + spec, "gate " + (dir / "hostile.case").string() + " --backend " + spec,
        // Three cases: a generated case may not need its inputs (every allowed key selected, or rows
        // without keys), so zeroed inputs show only on a case that does (case 2 of seed 2 does).
        "fuzz --op indexer --seed 2 --budget 3 --max-failures 1 --shrink-runs 1 --no-save --backend " + spec}) {
    const auto r = test::run_sh(env + AO_CLI + " " + cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    if (std::string(m.mode) != "zero_inputs" || cmd.rfind("fuzz", 0) != 0) {  // fuzz names the failing metrics
      EXPECT_NE(r.out.find(m.cause), std::string::npos) << cmd << "\n" << r.out;
    }
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Modes, PluginHostile, ::testing::ValuesIn(kHostile),
                         [](const auto& info) { return std::string(info.param.mode); });

TEST(PluginIsolation, InputsTheLibraryZeroesStayInItsChild) {
  const Layout l = make_layout(parse_case("op=indexer docs=512,256 cp=4 rank=2 seed=11"));
  const Inputs in = make_inputs(l);
  const Inputs copy = in;
  Outputs out = make_sentinel_outputs(l);
  auto be = make_backend(hostile("zero_inputs"));
  ASSERT_EQ(be->run(l, in, out).kind, RunStatus::Ok);
  // The plugin's outputs came back (lowest allowed keys) ...
  EXPECT_EQ(out.topk[size_t(l.segments[0].row0) * size_t(l.c.topk)], int32_t(l.docs[size_t(l.segments[0].doc)].kv_off));
  // ... its writes to the inputs did not.
  EXPECT_EQ(std::memcmp(in.q.data(), copy.q.data(), in.q.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(in.w.data(), copy.w.data(), in.w.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(in.k.data(), copy.k.data(), in.k.size() * sizeof(float)), 0);
}

TEST(PluginIsolation, MessageWithoutNulIsCutAtTheBuffer) {
  auto r = run_plugin(hostile("msg_nonul"), std::string(kIdxCp) + "3");
  ASSERT_EQ(r.verdict.kind, Verdict::Error);
  const std::string prefix = "plugin error: ";
  ASSERT_EQ(r.verdict.reason.rfind(prefix, 0), 0u) << r.verdict.reason.substr(0, 100);
  EXPECT_EQ(r.verdict.reason.size() - prefix.size(), 2047u);
  EXPECT_EQ(r.verdict.reason.find_first_not_of('A', prefix.size()), std::string::npos);
}

TEST(PluginIsolation, TimeoutIsValidated) {
  for (const char* bad : {"0", "-1", "abc", "nan", "inf"}) {
    PluginTimeout t(bad);
    try {
      make_backend(kPlugin);
      ADD_FAILURE() << "AO_PLUGIN_TIMEOUT=" << bad << " accepted";
    } catch (const BadInput& e) {
      EXPECT_EQ(e.key, "AO_PLUGIN_TIMEOUT");
      EXPECT_EQ(e.value, bad);
    }
  }
  const auto r = test::run_sh(std::string("AO_PLUGIN_TIMEOUT=-1 ") + AO_CLI + " repro " + kIdxCp + "1 --backend " + kPlugin);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("AO_PLUGIN_TIMEOUT"), std::string::npos) << r.out;
}

namespace {

std::string hex_of(const void* p, size_t n) {
  std::string h;
  for (size_t i = 0; i < n; ++i) h += fmt::format("{:02x}", static_cast<const unsigned char*>(p)[i]);
  return h;
}

struct EnvVar {
  std::string name;
  EnvVar(std::string n, const std::string& v) : name(std::move(n)) { ::setenv(name.c_str(), v.c_str(), 1); }
  ~EnvVar() { ::unsetenv(name.c_str()); }
};


bool alive(pid_t p) { return ::kill(p, 0) == 0 || errno != ESRCH; }

}  // namespace

// A library that searches its address space for the reference's answer finds none: it runs in a fresh
// host program, not in a fork of the process that computed (and holds) that answer.
TEST(PluginIsolation, TheReferenceAnswerIsNotInTheLibrarysMemory) {
  Trial trial(parse_case("op=sdpa docs=40,24 hq=2 hkv=1 dim=16 seed=4"));
  auto ref_be = make_backend("cpu-ref");
  TrialRun ref = trial.run(*ref_be);  // alive in this process while the plugin runs
  ASSERT_TRUE(ref.ok());
  ASSERT_GE(ref.out.o.size(), 16u);
  ASSERT_GE(ref.out.lse.size(), 8u);
  EnvVar o_key("AO_CHEAT_O_KEY", hex_of(ref.out.o.data(), 64));
  EnvVar o_end("AO_CHEAT_O_KEY_END", hex_of(ref.out.o.data() + ref.out.o.size() - 16, 64));
  EnvVar lse_key("AO_CHEAT_LSE_KEY", hex_of(ref.out.lse.data(), 32));
  EnvVar lse_end("AO_CHEAT_LSE_KEY_END", hex_of(ref.out.lse.data() + ref.out.lse.size() - 8, 32));
  auto cheat = make_backend(hostile("copy_answer"));
  TrialRun got = trial.run(*cheat);
  const Verdict v = Trial::unjudged(got).value_or(trial.judge(got, ref));
  EXPECT_NE(v.kind, Verdict::Pass) << v.reason;
  EXPECT_NE(v.reason.find("no answer in memory"), std::string::npos) << v.reason;
}

// A library whose daemon kills the supervising process: nothing survives the run, and the run is an
// error of the backend.
TEST(PluginIsolation, ADaemonThatKillsItsSupervisorDoesNotSurvive) {
  TempDir d;
  EnvVar pid_file("AO_HOSTILE_PID_FILE", (d.path / "daemon.pid").string());
  auto r = run_plugin(hostile("daemon_kill_reaper"), "op=sdpa docs=40 hq=2 hkv=1 dim=16 seed=1");
  EXPECT_EQ(r.verdict.kind, Verdict::Error) << r.verdict.reason;
  std::ifstream in(d.path / "daemon.pid");
  pid_t p = 0;
  in >> p;
  ASSERT_GT(p, 0);
  for (int i = 0; i < 100 && alive(p); ++i) ::usleep(10000);
  EXPECT_FALSE(alive(p)) << "daemon " << p << " survived";
  if (p > 0 && alive(p)) ::kill(p, SIGKILL);
}

// Library code holds no descriptor of the harness (the report directory's lock above all): only the
// host's message pipe and its request memfd.
TEST(PluginIsolation, HoldsNoDescriptorOfTheHarness) {
  TempDir d;
  std::ofstream(d.path / "one.case") << "op=sdpa docs=40 hq=2 hkv=1 dim=16 seed=1\n";
  const auto r = test::run_sh(std::string(AO_CLI) + " gate " + (d.path / "one.case").string() + " --backend " +
                              hostile("list_fds") + " --report-dir " + (d.path / "reports").string());
  EXPECT_EQ(r.code, 1) << r.out;
  const auto at = r.out.find("fds: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string fds = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(fds.find("3=pipe:"), std::string::npos) << fds;
  EXPECT_NE(fds.find("4=/memfd:ao-plugin-request"), std::string::npos) << fds;
  EXPECT_NE(fds.find("5=/memfd:ao-plugin-outputs"), std::string::npos) << fds;
  EXPECT_EQ(fds.find("6="), std::string::npos) << fds;
  EXPECT_EQ(fds.find(d.path.string()), std::string::npos) << fds;
}

// A plugin daemon that kills its supervisor during a gate leaves no lock behind: the next gate on the
// same report directory runs (exit 1: the plugin's error), it does not stop at a lock held by a dead pid.
TEST(PluginIsolation, ADaemonKeepsNoReportDirLock) {
  TempDir d;
  std::ofstream(d.path / "one.case") << "op=sdpa docs=40 hq=2 hkv=1 dim=16 seed=1\n";
  const std::string gate = "AO_HOSTILE_PID_FILE=" + (d.path / "daemon.pid").string() + " " + AO_CLI + " gate " +
                           (d.path / "one.case").string() + " --no-explain --report-dir " +
                           (d.path / "reports").string() + " --backend ";
  const auto first = test::run_sh(gate + hostile("daemon_kill_reaper"));
  EXPECT_EQ(first.code, 1) << first.out;
  const auto second = test::run_sh(gate + "cpu-ref");
  EXPECT_EQ(second.code, 0) << second.out;
  std::ifstream in(d.path / "daemon.pid");
  pid_t p = 0;
  in >> p;
  ASSERT_GT(p, 0);
  EXPECT_FALSE(alive(p)) << "daemon " << p << " survived the gate";
  if (alive(p)) ::kill(p, SIGKILL);
}

// The ABI version is checked on every load: a library replaced by one of another version after the
// backend was made is refused at its next run (an error naming the version), never run unchecked.
TEST(Plugin, AbiVersionIsCheckedOnEveryRun) {
  TempDir d;
  const auto lib = d.path / "libswapped.so";
  std::filesystem::copy_file(AO_EXAMPLE_PLUGIN, lib);
  auto be = make_backend("plugin:" + lib.string());
  auto ref = make_backend("cpu-ref");
  const Case c = parse_case(std::string(kSdpa) + "7");
  EXPECT_EQ(run_case(c, *be, *ref).verdict.kind, Verdict::Pass);
  std::filesystem::remove(lib);  // a new file (a running host may still map the old one)
  std::filesystem::copy_file(AO_EXAMPLE_PLUGIN_ABI99, lib);
  const auto r = run_case(c, *be, *ref);
  EXPECT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("plugin ABI version 99 but this harness speaks versions 1 to 2"), std::string::npos)
      << r.verdict.reason;
}

// Naming a plugin in a `# catches:` claim loads nothing unless the gate runs it: a gate of cpu-ref never
// runs the claimed library's constructor (which could hang for AO_PLUGIN_TIMEOUT per claim).
TEST(Plugin, ClaimsOfPluginsTheGateDoesNotRunLoadNothing) {
  TempDir d;
  const auto mark = d.path / "constructor-ran";
  std::ofstream(d.path / "claim.case") << "# catches: " << hostile("mark_ctor") << "\n"
                                       << "op=sdpa docs=40 hq=2 hkv=1 dim=16 seed=1\n";
  const std::string env = "AO_HOSTILE_MARK_FILE=" + mark.string() + " ";
  const auto r = test::run_sh(env + AO_CLI + " gate " + (d.path / "claim.case").string() + " --backend cpu-ref");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(mark)) << "the claimed plugin was loaded";
  // Running it loads it (the mark is real), and a claim naming a missing library is still refused.
  const auto run = test::run_sh(env + AO_CLI + " gate " + (d.path / "claim.case").string() + " --backend " +
                                hostile("mark_ctor"));
  EXPECT_TRUE(std::filesystem::exists(mark)) << run.out;
  std::ofstream(d.path / "missing.case") << "# catches: plugin:" << (d.path / "nope.so").string() << "\n"
                                         << "op=sdpa docs=40 hq=2 hkv=1 dim=16 seed=1\n";
  const auto missing = test::run_sh(std::string(AO_CLI) + " gate " + (d.path / "missing.case").string() +
                                    " --backend cpu-ref");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("no such library file"), std::string::npos) << missing.out;
}

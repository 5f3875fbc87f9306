// exec: backend and the .npy module. The adapter is attn_oracle.adapters.numpy_ref, run through its shim at
// scripts/adapters/numpy_ref.py (the path found files name) under Debian's
// /usr/bin/python3 (python3-numpy): it must pass on fresh random cases, its planted bug must be
// caught, and every failure mode (--fault) must be a clear backend error, never a crash.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/npy.h"
#include "temp_files.h"

using namespace ao;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kPython = "/usr/bin/python3";

bool have_numpy() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return ok;
}
#define REQUIRE_NUMPY() \
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy (Debian python3-numpy) is not installed"

std::string adapter(const std::string& args = "") {
  return std::string(kPython) + " '" + AO_SOURCE_DIR + "/scripts/adapters/numpy_ref.py' " + args;
}


int python(const std::string& code) {
  TempDir d;
  const std::string f = d.path.string() + "/t.py";
  std::ofstream(f) << code;
  return std::system((std::string(kPython) + " " + f).c_str());
}

CaseResult run_exec(const std::string& line, const std::string& args, double timeout = 120) {
  ExecOptions o;
  o.timeout_s = timeout;
  auto be = make_exec_backend(adapter(args), o);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref);
}

const char* kIdxCp = "op=indexer docs=512,256 cp=4 rank=1 heads=4 dim=32 topk=16 seed=";
const char* kSdpaPad = "op=sdpa lens=37,5,64 q_pad=3,0,2 kv_pad=0,6,1 tail=9 hq=4 hkv=2 dim=32 seed=";

}  // namespace

// ---- .npy ----

TEST(Npy, ReadsWhatNumpyWrites) {
  REQUIRE_NUMPY();
  TempDir d;
  ASSERT_EQ(python("import numpy as np\n"
                   "d='" + d.path.string() + "'\n"
                   "np.save(d+'/f4.npy', np.arange(24, dtype=np.float32).reshape(2,3,4) * 0.5 - 3)\n"
                   "np.save(d+'/i4.npy', np.array([[-1, 7, 2**31-1]], dtype=np.int32))\n"
                   "np.save(d+'/u2.npy', np.array([0x3f80, 0xffff, 0], dtype=np.uint16))\n"
                   "np.save(d+'/f2.npy', np.array([1.5, -2.0], dtype=np.float16))\n"
                   "np.save(d+'/empty.npy', np.zeros((0, 5), dtype=np.float32))\n"
                   "np.save(d+'/scalar.npy', np.float32(2.5))\n"
                   "with open(d+'/v2.npy','wb') as f: np.lib.format.write_array(f, np.ones((3,), np.float32), version=(2,0))\n"
                   "np.save(d+'/fortran.npy', np.asfortranarray(np.ones((2,3), np.float32)))\n"
                   "np.save(d+'/big.npy', np.ones(3, dtype='>f4'))\n"),
            0);
  auto f4 = npy::read_as<float>(d.path.string() + "/f4.npy", "<f4", {2, 3, 4});
  for (int i = 0; i < 24; ++i) EXPECT_EQ(f4[size_t(i)], float(i) * 0.5f - 3.f);
  EXPECT_EQ(npy::read_as<int32_t>(d.path.string() + "/i4.npy", "<i4", {1, 3}), (std::vector<int32_t>{-1, 7, 2147483647}));
  EXPECT_EQ(npy::read_as<uint16_t>(d.path.string() + "/u2.npy", "<u2", {3}), (std::vector<uint16_t>{0x3f80, 0xffff, 0}));
  auto f2 = npy::read(d.path.string() + "/f2.npy");
  EXPECT_EQ(f2.descr, "<f2");
  EXPECT_EQ(f2.data.size(), 4u);
  EXPECT_TRUE(npy::read_as<float>(d.path.string() + "/empty.npy", "<f4", {0, 5}).empty());
  EXPECT_EQ(npy::read_as<float>(d.path.string() + "/scalar.npy", "<f4", {}), std::vector<float>{2.5f});
  EXPECT_EQ(npy::read_as<float>(d.path.string() + "/v2.npy", "<f4", {3}), (std::vector<float>{1, 1, 1}));
  EXPECT_THROW(npy::read(d.path.string() + "/fortran.npy"), npy::NpyError);
  try {
    npy::read(d.path.string() + "/big.npy");
    FAIL() << "big-endian accepted";
  } catch (const npy::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("big-endian"), std::string::npos) << e.what();
  }
  // Wrong dtype / shape are named.
  try {
    npy::read_as<float>(d.path.string() + "/i4.npy", "<f4", {1, 3});
    FAIL();
  } catch (const npy::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("dtype <f4 expected, got <i4"), std::string::npos) << e.what();
  }
  try {
    npy::read_as<float>(d.path.string() + "/f4.npy", "<f4", {2, 12});
    FAIL();
  } catch (const npy::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("shape (2, 12) expected, got (2, 3, 4)"), std::string::npos) << e.what();
  }
}

TEST(Npy, NumpyReadsWhatWeWrite) {
  REQUIRE_NUMPY();
  TempDir d;
  std::mt19937 rng(20261202);
  std::vector<float> f(7 * 5 * 3);
  for (auto& x : f) x = std::uniform_real_distribution<float>(-4, 4)(rng);
  f[3] = std::nanf("");
  f[4] = -INFINITY;
  std::vector<int32_t> i(11);
  for (auto& x : i) x = int32_t(rng());
  std::vector<uint16_t> u{0x7fc0, 0x3f80, 0x8000};
  npy::write(d.path.string() + "/f.npy", "<f4", {7, 5, 3}, f.data());
  npy::write(d.path.string() + "/i.npy", "<i4", {11}, i.data());
  npy::write(d.path.string() + "/u.npy", "<u2", {1, 3}, u.data());
  std::string fl, il;
  for (size_t k = 0; k < f.size(); ++k) {
    const std::string x = std::isfinite(f[k]) ? fmt::format("{:.9g}", f[k]) : std::isnan(f[k]) ? "np.nan" : "-np.inf";
    fl += fmt::format("{}{}", k ? "," : "", x);
  }
  for (size_t k = 0; k < i.size(); ++k) il += fmt::format("{}{}", k ? "," : "", i[k]);
  EXPECT_EQ(python("import numpy as np, sys\n"
                   "d='" + d.path.string() + "'\n"
                   "f=np.load(d+'/f.npy'); i=np.load(d+'/i.npy'); u=np.load(d+'/u.npy')\n"
                   "assert f.dtype==np.float32 and f.shape==(7,5,3), (f.dtype, f.shape)\n"
                   "assert np.array_equal(f.ravel(), np.array([" + fl + "], np.float32), equal_nan=True)\n"
                   "assert i.dtype==np.int32 and np.array_equal(i, np.array([" + il + "], np.int32))\n"
                   "assert u.dtype==np.uint16 and u.shape==(1,3) and u.tolist()==[[0x7fc0,0x3f80,0x8000]]\n"),
            0);
}

TEST(Npy, TruncatedTrailingAndGarbageFilesAreNamed) {
  TempDir d;
  std::vector<float> v(100, 1.f);
  const std::string p = d.path.string() + "/x.npy";
  npy::write(p, "<f4", {10, 10}, v.data());
  const auto full = fs::file_size(p);
  fs::resize_file(p, full - 8);
  try {
    npy::read(p);
    FAIL();
  } catch (const npy::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  fs::resize_file(p, 40);  // inside the header
  EXPECT_THROW(npy::read(p), npy::NpyError);
  npy::write(p, "<f4", {10, 10}, v.data());
  std::ofstream(p, std::ios::app | std::ios::binary) << "xx";
  try {
    npy::read(p);
    FAIL();
  } catch (const npy::NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("trailing"), std::string::npos) << e.what();
  }
  std::ofstream(p, std::ios::trunc) << "not a numpy file at all";
  EXPECT_THROW(npy::read(p), npy::NpyError);
  EXPECT_THROW(npy::read(d.path.string() + "/nope.npy"), npy::NpyError);
}

// ---- the case directory ----

TEST(ExecCaseDir, MetaAndInputsDescribeTheLayout) {
  TempDir d;
  const Layout l = make_layout(parse_case("op=indexer docs=256,128 cp=2 rank=1 heads=2 dim=8 topk=4 dtype=bf16 seed=3"));
  const Inputs in = make_inputs(l);
  const auto m = nlohmann::json::parse(write_case_dir(d.path.string(), l, in));
  EXPECT_EQ(m["cu_seqlens_q"], (std::vector<int64_t>{0, 256, 384}));
  ASSERT_EQ(m["segments"].size(), l.segments.size());
  for (size_t i = 0; i < l.segments.size(); ++i) {
    EXPECT_EQ(m["q_causal_offsets"][i], l.segments[i].pos0);
    EXPECT_EQ(m["segments"][i]["row0"], l.segments[i].row0);
    EXPECT_EQ(m["segments"][i]["valid"], l.segments[i].valid);
  }
  EXPECT_EQ(m["inputs"]["q"]["stored_as"], "<u2");
  EXPECT_NE(m["dtype_note"].get<std::string>().find("uint16"), std::string::npos);
  // bf16 inputs are the exact bit patterns of the values the reference sees.
  auto q = npy::read_as<uint16_t>(d.path.string() + "/q.npy", "<u2", {l.q_rows, 2, 8});
  for (size_t i = 0; i < q.size(); ++i) {
    const float x = bf16_bits_to_f32(q[i]);
    if (std::isnan(in.q[i])) EXPECT_TRUE(std::isnan(x));
    else EXPECT_EQ(x, in.q[i]) << i;
  }
  auto topk = npy::read_as<int32_t>(d.path.string() + "/topk.npy", "<i4", {l.q_rows, 4});
  for (auto t : topk) EXPECT_EQ(t, kSentinelIndex);
  std::ifstream cf(d.path.string() + "/case.txt");
  std::string line;
  std::getline(cf, line);
  EXPECT_EQ(parse_case(line), l.c);
}

// The semantics string states the rule of every convention key an exec: peer receives in meta.json,
// with the values the case gave them.
TEST(ExecCaseDir, SemanticsDescribeEveryConventionKey) {
  TempDir d;
  const Layout l = make_layout(parse_case(
      "op=sdpa docs=8,5 window=2 window_right=3 window_convention=fa empty_rows=posinf max_seqlen_kv=16 "
      "num_splits=2 hq=1 dim=8"));
  const auto m = nlohmann::json::parse(write_case_dir(d.path.string(), l, make_inputs(l)));
  EXPECT_EQ(m["window_right"], 3);
  EXPECT_EQ(m["window_convention"], "fa");
  EXPECT_EQ(m["empty_rows"], "posinf");
  EXPECT_EQ(m["num_splits"], 2);
  EXPECT_EQ(m["max_seqlen"]["kv"], 16);
  const std::string sem = m["semantics"].get<std::string>();
  for (const char* rule : {"s <= p + window_right", "-1 = no right bound", "window_convention", "cudnn s > p - window",
                           "fa s >= p - window", "+inf under empty_rows=posinf", "-inf under empty_rows=neginf",
                           "num_splits", "max_seqlen", "ceil(max_seqlen.kv / num_splits)"})
    EXPECT_NE(sem.find(rule), std::string::npos) << "semantics lacks '" << rule << "': " << sem;
  // Every key the string names is in meta.json.
  for (const char* key : {"window", "window_right", "window_convention", "empty_rows", "num_splits", "max_seqlen"})
    EXPECT_TRUE(m.contains(key)) << key;
}

// ---- the numpy adapter through exec: ----

TEST(ExecNumpy, PassesOnFreshIndexerAndSdpaCases) {
  REQUIRE_NUMPY();
  std::mt19937 rng(std::random_device{}());
  const unsigned seed = rng() % 100000;
  SCOPED_TRACE(fmt::format("seed={}", seed));
  for (std::string line : {std::string(kIdxCp) + std::to_string(seed),
                           std::string(kIdxCp) + std::to_string(seed + 1) + " dtype=fp32 ratio=2 crop=1",
                           std::string("op=indexer docs=300,200 pad=4 heads=4 dim=16 topk=400 dtype=fp16 seed=") + std::to_string(seed),
                           std::string(kSdpaPad) + std::to_string(seed),
                           std::string(kSdpaPad) + std::to_string(seed + 2) + " mask=bottomright dtype=fp16",
                           std::string("op=sdpa docs=64,128 cp=2 rank=0 hq=2 hkv=1 dim=16 window=20 dtype=fp32 seed=") + std::to_string(seed)}) {
    auto r = run_exec(line, "");
    EXPECT_EQ(r.verdict.kind, Verdict::Pass) << format_result(r);
  }
}

TEST(ExecNumpy, PlantedTopLeftBugIsCaught) {
  REQUIRE_NUMPY();
  auto r = run_exec(std::string(kIdxCp) + "11", "--bug topleft-cp");
  EXPECT_EQ(r.verdict.kind, Verdict::Fail) << format_result(r);
  auto s = run_exec("op=sdpa docs=128 cp=2 rank=0 hq=2 hkv=2 dim=16 seed=4", "--bug topleft-cp");
  EXPECT_EQ(s.verdict.kind, Verdict::Fail) << format_result(s);
}

TEST(ExecNumpy, NanOutputIsReportedAsContamination) {
  REQUIRE_NUMPY();
  auto r = run_exec(std::string(kSdpaPad) + "5", "--fault nan");
  ASSERT_EQ(r.verdict.kind, Verdict::Fail) << format_result(r);
  const Metric* m = r.verdict.find("nonfinite_valid");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->failed);
  EXPECT_EQ(m->value, 1);
}

struct FaultCase {
  const char* fault;
  const char* op;  // "idx" or "sdpa"
  Verdict::Kind kind;
  const char* reason_has;
};

void PrintTo(const FaultCase& f, std::ostream* os) { *os << "--fault " << f.fault << " (" << f.op << ")"; }

class ExecFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(ExecFault, IsAClearBackendFailure) {
  REQUIRE_NUMPY();
  const auto& p = GetParam();
  const std::string line = std::string(std::string(p.op) == "idx" ? kIdxCp : kSdpaPad) + "9";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_exec(line, std::string("--fault ") + p.fault, 3);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.verdict.kind, p.kind) << format_result(r);
  EXPECT_NE(r.verdict.reason.find(p.reason_has), std::string::npos) << r.verdict.reason;
  EXPECT_LT(secs, 15) << "the timeout must bound the run";
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ExecFault,
    ::testing::Values(
        FaultCase{"exit3", "idx", Verdict::Error, "exited with status 3; stderr tail:\nnumpy_ref: planted failure"},
        FaultCase{"sleep", "sdpa", Verdict::Error, "timed out after 3 s"},
        FaultCase{"signal", "idx", Verdict::Error, "killed by signal 11"},
        FaultCase{"skip", "sdpa", Verdict::Skipped, "declines the case (planted skip)"},
        FaultCase{"missing", "idx", Verdict::Error, "topk.npy is missing"},
        FaultCase{"missing", "sdpa", Verdict::Error, "o.npy is missing"},
        FaultCase{"nowrite", "sdpa", Verdict::Error, "did not write o.npy"},
        FaultCase{"shape", "idx", Verdict::Error, "bad output topk.npy"},
        FaultCase{"shape", "sdpa", Verdict::Error, "expected, got ("},
        FaultCase{"dtype", "idx", Verdict::Error, "dtype <i4 expected, got <i8"},
        FaultCase{"dtype", "sdpa", Verdict::Error, "dtype <f4 expected, got <f8"},
        FaultCase{"truncated", "sdpa", Verdict::Error, "truncated"},
        FaultCase{"garbage", "idx", Verdict::Error, "bad magic"}),
    [](const auto& info) { return std::string(info.param.fault) + "_" + info.param.op; });

TEST(ExecFaultExtra, TimeoutKillsTheWholeProcessGroup) {
  REQUIRE_NUMPY();
  TempDir root;
  ExecOptions o;
  o.timeout_s = 2;
  o.keep_dir = true;
  o.work_root = root.path.string();
  // The adapter starts a grandchild shell (`sh -c 'sleep 60; :' x <case dir>`) and sleeps itself.
  auto be = make_exec_backend(adapter("--fault sleep-child"), o);
  auto ref = make_backend("cpu-ref");
  auto r = run_case(parse_case(std::string(kIdxCp) + "2"), *be, *ref);
  ASSERT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("process group killed"), std::string::npos);
  EXPECT_NE(r.verdict.reason.find("case dir kept"), std::string::npos);
  // No process of that group survives: every process whose command line names the kept dir is gone.
  int survivors = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream cmd(e.path() / "cmdline");
    std::string s((std::istreambuf_iterator<char>(cmd)), {});
    if (s.find(root.path.string()) != std::string::npos) ++survivors;
  }
  EXPECT_EQ(survivors, 0);
}

TEST(ExecFaultExtra, CommandNotFoundShowsTheShellsMessage) {
  ExecOptions o;
  o.timeout_s = 10;
  auto be = make_exec_backend("/nonexistent/kernel-adapter --x", o);
  auto ref = make_backend("cpu-ref");
  auto r = run_case(parse_case(std::string(kIdxCp) + "1"), *be, *ref);
  EXPECT_EQ(r.verdict.kind, Verdict::Error);
  EXPECT_NE(r.verdict.reason.find("status 127"), std::string::npos) << r.verdict.reason;
  EXPECT_NE(r.verdict.reason.find("not found"), std::string::npos) << r.verdict.reason;
}

TEST(ExecRegistry, SpecKeepsTheWholeCommandAndEmptyIsUnavailable) {
  auto be = make_backend("exec:/usr/bin/python3 a.py --opt x:y");
  EXPECT_EQ(be->name(), "exec:/usr/bin/python3 a.py --opt x:y");
  EXPECT_TRUE(be->unavailable_reason().empty());
  auto none = make_backend("exec");
  EXPECT_NE(none->unavailable_reason().find("needs a command"), std::string::npos);
}

TEST(ExecCli, ReproExitCodesThroughExec) {
  REQUIRE_NUMPY();
  const std::string base = std::string(AO_CLI) + " repro " + kIdxCp + "21 --backend \"exec:" + adapter();
  EXPECT_EQ(WEXITSTATUS(std::system((base + "\" >/dev/null").c_str())), 0);
  EXPECT_EQ(WEXITSTATUS(std::system((base + "--bug topleft-cp\" >/dev/null").c_str())), 1);
  EXPECT_EQ(WEXITSTATUS(std::system((base + "--fault exit3\" >/dev/null").c_str())), 1);
  EXPECT_EQ(WEXITSTATUS(std::system((base + "--fault skip\" >/dev/null").c_str())), 125);
  EXPECT_EQ(WEXITSTATUS(std::system(("AO_EXEC_TIMEOUT=-1 " + base + "\" >/dev/null 2>&1").c_str())), 2);
}

// The warm host (attn_oracle.adapters.serve + client, through their shims) that the device campaign uses to amortise the torch
// import: the same verdicts and exit codes travel through it.
TEST(ExecServe, ClientRelaysVerdictsSkipsAndErrors) {
  REQUIRE_NUMPY();
  TempDir d;
  const std::string sock = d.path.string() + "/ao.sock";
  const std::string dir = std::string(AO_SOURCE_DIR) + "/scripts/adapters/";
  ASSERT_EQ(std::system((std::string(kPython) + " '" + dir + "ao_serve.py' --no-torch --idle-exit 60 --socket '" + sock +
                         "' >/dev/null 2>&1 &").c_str()),
            0);
  for (int i = 0; i < 100 && !fs::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(sock)) << "ao_serve.py did not start";
  ExecOptions o;
  o.timeout_s = 60;
  auto client = [&](const std::string& args) {
    auto be = make_exec_backend(std::string(kPython) + " '" + dir + "ao_client.py' --socket '" + sock + "' numpy_ref " + args, o);
    auto ref = make_backend("cpu-ref");
    return run_case(parse_case(std::string(kIdxCp) + "8"), *be, *ref);
  };
  EXPECT_EQ(client("").verdict.kind, Verdict::Pass);
  EXPECT_EQ(client("--bug topleft-cp").verdict.kind, Verdict::Fail);
  EXPECT_EQ(client("--fault skip").verdict.kind, Verdict::Skipped);
  auto e = client("--fault exit3");
  EXPECT_EQ(e.verdict.kind, Verdict::Error);
  EXPECT_NE(e.verdict.reason.find("planted failure"), std::string::npos) << e.verdict.reason;
  EXPECT_EQ(client("--fault dtype").verdict.kind, Verdict::Error);
  EXPECT_EQ(std::system((std::string(kPython) + " -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('" + sock +
                         "'); s.sendall(b'{\\\"adapter\\\": \\\"__quit__\\\"}\\n'); s.recv(99)\"").c_str()),
            0);
  fs::remove(sock);
  auto gone = client("");
  EXPECT_EQ(gone.verdict.kind, Verdict::Error);
  EXPECT_NE(gone.verdict.reason.find("no warm host"), std::string::npos) << gone.verdict.reason;
}

// ---- hostile exec: commands (tiny shell scripts written here): no hang, no leak, bounded memory ----

namespace {

// A shell script `body` (the case dir is "$1") as an exec: command, run on one indexer case.
struct Script {
  TempDir root;  // holds the script, pid files and (AO_EXEC_DIR) the case directories
  std::string path;
  explicit Script(const std::string& body) : path(root.path.string() + "/backend.sh") {
    std::ofstream(path) << "#!/bin/sh\nd=\"$1\"\nR='" << root.path.string() << "'\n" << body << "\n";
  }
  CaseResult run(double timeout = 20) const {
    ExecOptions o;
    o.timeout_s = timeout;
    o.work_root = root.path.string();
    auto be = make_exec_backend("/bin/sh '" + path + "'", o);
    auto ref = make_backend("cpu-ref");
    return run_case(parse_case(std::string(kIdxCp) + "4"), *be, *ref);
  }
  // Case directories left under the root (every path must remove them).
  int case_dirs_left() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(root.path.string())) n += e.path().filename().string().rfind("ao-exec-", 0) == 0;
    return n;
  }
};

// Waits until the pid file the script writes is complete; 0 if it never is.
pid_t read_pid(const std::string& file) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream f(file);
    pid_t p = 0;
    if (f >> p && p > 0) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return 0;
}

bool alive(pid_t p) { return ::kill(p, 0) == 0 || errno != ESRCH; }

// Peak RSS growth (KiB) of running fn in a forked copy of this process.
long rss_growth_kib(const std::function<void()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    fn();
    ::getrusage(RUSAGE_SELF, &after);
    const long d = after.ru_maxrss - before.ru_maxrss;
    (void)!::write(fds[1], &d, sizeof d);
    ::_exit(0);
  }
  ::close(fds[1]);
  long d = -1;
  if (::read(fds[0], &d, sizeof d) != sizeof d) d = -1;
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return d;
}

}  // namespace

TEST(ExecHostile, FifoOutputIsAnErrorNotAHang) {
  Script s("rm -f \"$d/topk.npy\"; mkfifo \"$d/topk.npy\"");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.run(5);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  ASSERT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("topk.npy: a FIFO, not a regular file"), std::string::npos) << r.verdict.reason;
  EXPECT_EQ(s.case_dirs_left(), 0);
}

TEST(ExecHostile, SymlinkedOutputsAreRefusedByName) {
  for (const char* target : {"/", "/etc/hostname"}) {
    Script s(std::string("rm -f \"$d/topk.npy\"; ln -s ") + target + " \"$d/topk.npy\"");
    auto r = s.run();
    ASSERT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
    EXPECT_NE(r.verdict.reason.find("topk.npy: a symbolic link, not a regular file"), std::string::npos)
        << r.verdict.reason;
    EXPECT_EQ(r.verdict.reason.find("9223372036854775807"), std::string::npos) << r.verdict.reason;
  }
  TempDir d;  // the reader itself, on a directory and a FIFO
  ASSERT_EQ(::mkfifo((d.path.string() + "/f.npy").c_str(), 0600), 0);
  for (const std::string& p : {d.path.string(), d.path.string() + "/f.npy"}) {
    try {
      npy::read_as<float>(p, "<f4", {1});
      ADD_FAILURE() << p << " read";
    } catch (const npy::NpyError& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
}

TEST(ExecHostile, SetsidDescendantDoesNotSurviveTheRun) {
  // Exits at once (no outputs), leaving a process in a session of its own: outside the process group.
  Script s("setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' \"$R/orphan.pid\" >/dev/null 2>&1 &\n"
           "while [ ! -s \"$R/orphan.pid\" ]; do sleep 0.05; done\nexit 0");
  auto r = s.run();
  EXPECT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  const pid_t orphan = read_pid(s.root.path.string() + "/orphan.pid");
  ASSERT_GT(orphan, 0);
  EXPECT_FALSE(alive(orphan)) << "pid " << orphan << " survived the run";
  EXPECT_EQ(s.case_dirs_left(), 0);
  // The same on the timeout path: the command hangs after starting the escaped process.
  Script t("setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' \"$R/orphan.pid\" >/dev/null 2>&1 &\n"
           "echo $$ > \"$R/sh.pid\"; sleep 1000");
  auto rt = t.run(2);
  EXPECT_NE(rt.verdict.reason.find("timed out after 2 s"), std::string::npos) << rt.verdict.reason;
  for (const char* f : {"/orphan.pid", "/sh.pid"}) {
    const pid_t p = read_pid(t.root.path.string() + f);
    ASSERT_GT(p, 0) << f;
    EXPECT_FALSE(alive(p)) << f << " " << p << " survived the timeout";
  }
  EXPECT_EQ(t.case_dirs_left(), 0);
}

TEST(ExecHostile, InterruptKillsTheCommandAndRemovesTheCaseDir) {
  Script s("echo $$ > \"$R/sh.pid\"; sleep 1000");
  install_interrupt_handlers();
  std::thread stopper([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGTERM);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.run(60);
  stopper.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  reset_interrupt();
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  EXPECT_LT(secs, 10);
  ASSERT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  EXPECT_NE(r.verdict.reason.find("interrupted by signal 15"), std::string::npos) << r.verdict.reason;
  const pid_t sh = read_pid(s.root.path.string() + "/sh.pid");
  ASSERT_GT(sh, 0);
  EXPECT_FALSE(alive(sh));
  EXPECT_EQ(s.case_dirs_left(), 0);
}

TEST(ExecHostile, HugeStderrKeepsABoundedTail) {
  // 200 MB of stderr, then a last line: the tail shows it, memory does not grow with the stream.
  Script s("head -c 200000000 /dev/zero | tr '\\000' x >&2; printf '\\nthe last line \\377\\376\\n' >&2; exit 3");
  const long kib = rss_growth_kib([&] {
    const auto res = s.run(120);
    if (res.verdict.kind != Verdict::Error || res.verdict.reason.find("the last line") == std::string::npos) ::_exit(1);
  });
  ASSERT_GE(kib, 0) << "the run in the forked copy did not report an Error with the last line";
  EXPECT_LT(kib, 64 * 1024) << "peak RSS grew by " << kib << " KiB";
  const auto r = s.run(120);
  ASSERT_EQ(r.verdict.kind, Verdict::Error);
  EXPECT_NE(r.verdict.reason.find("exited with status 3"), std::string::npos);
  EXPECT_LT(r.verdict.reason.size(), 3000u);
}

// A .npy header announcing (100000000, 8) int32 (3.2 GB of data); data_bytes of (sparse) data follow.
void write_announcing_npy(const std::string& path, uint64_t data_bytes) {
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (100000000, 8), }";
  h.append((10 + h.size() + 1 + 63) / 64 * 64 - 10 - h.size() - 1, ' ');
  h += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {char(h.size() & 0xff), char(h.size() >> 8)};
  f.write(len, 2);
  f << h;
  f.close();
  fs::resize_file(path, 10 + h.size() + data_bytes);
}

TEST(ExecHostile, HugeNpyHeaderIsRefusedBeforeAllocating) {
  TempDir d;
  const std::string huge = d.path.string() + "/huge.npy";
  write_announcing_npy(huge, uint64_t(100000000) * 8 * 4);  // a sparse 3.2 GB file, valid as such
  Script s("rm -f \"$d/topk.npy\"; ln '" + huge + "' \"$d/topk.npy\"");
  long kib = rss_growth_kib([&] {
    const auto res = s.run();
    if (res.verdict.kind != Verdict::Error || res.verdict.reason.find("got (100000000, 8)") == std::string::npos) ::_exit(1);
  });
  ASSERT_GE(kib, 0) << "the run did not report the announced shape";
  EXPECT_LT(kib, 64 * 1024) << "peak RSS grew by " << kib << " KiB";
  // The expected shape but no data behind it: refused on the file size, before allocating.
  write_announcing_npy(huge, 4096);
  kib = rss_growth_kib([&] {
    try {
      npy::read_as<int32_t>(huge, "<i4", {100000000, 8});
    } catch (const npy::NpyError& e) {
      if (std::string(e.what()).find("truncated") != std::string::npos) return;
    }
    ::_exit(1);
  });
  ASSERT_GE(kib, 0) << "not refused as truncated";
  EXPECT_LT(kib, 64 * 1024) << "peak RSS grew by " << kib << " KiB";
}

// A command that floods stdout leaves at most AO's cap in <case dir>/stdout.txt: the head, then one line
// saying how much was dropped (the stderr tail keeps the end of the other stream).
TEST(ExecFaultExtra, StdoutFileIsBounded) {
  TempDir root;
  ExecOptions o;
  o.timeout_s = 60;
  o.keep_dir = true;
  o.work_root = root.path.string();
  auto be = make_exec_backend("echo first-line; yes flood | head -c 40000000; exit 3; :", o);
  auto ref = make_backend("cpu-ref");
  auto r = run_case(parse_case(std::string(kIdxCp) + "2"), *be, *ref);
  ASSERT_EQ(r.verdict.kind, Verdict::Error) << format_result(r);
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(root.path.string())) {
    ++dirs;
    const auto f = e.path() / "stdout.txt";
    ASSERT_TRUE(fs::exists(f));
    EXPECT_LE(fs::file_size(f), (size_t(16) << 20) + 200);
    std::ifstream in(f);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first, "first-line");
    in.seekg(-120, std::ios::end);
    std::string end((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(end.find("[attn-oracle: stdout cut after its first 16777216 bytes;"), std::string::npos) << end;
  }
  EXPECT_EQ(dirs, 1);
}

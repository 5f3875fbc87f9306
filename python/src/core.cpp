// attn_oracle._core: the C++ core bound for Python (nanobind). Nothing is re-implemented here: a Case
// is a Trial (attn_oracle/pipeline/trial.h) whose inputs are handed out as arrays over a copy of them
// (the trial's own stay private: no Python code reaches what the verdict is computed against; see
// docs/threat-model.md), a verdict comes from run_trial() on that same trial and is returned as the text
// of case_json() (attn_oracle/report/report.h: report.json's case objects, so the field names are
// spelled once), a Python callable is a Backend (PyBackend) that the campaign (attn_oracle/fuzz/campaign.h)
// and the corpus reader (attn_oracle/fuzz/case_file.h) drive like any other. The tensors are the exec: protocol's tables
// (attn_oracle/backends/external.h: external_inputs/external_outputs), so an output tensor added there
// appears here without binding code.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/case/case.h"
#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/inputs/input_fingerprint.h"
#include "attn_oracle/internal/bad_input.h"
#include "attn_oracle/internal/interrupt.h"
#include "attn_oracle/internal/option_ranges.h"
#include "attn_oracle/internal/utf8.h"
#include "attn_oracle/pipeline/memory_budget.h"
#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/report/dir.h"
#include "attn_oracle/report/report.h"
#include "attn_oracle/verdict/claim.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ao {
namespace {

// The arguments a Python caller gives, checked against the CLI's table (option_ranges.h): a BadInput naming
// the argument and its value, never a raw conversion error or an overflowed number.
std::string shown(nb::handle v) {
  try {
    return sanitize_utf8(nb::cast<std::string>(nb::repr(v)));
  } catch (...) {
    return "?";
  }
}

double real_arg(const OptionRange& r, nb::handle v) {
  if (!PyFloat_Check(v.ptr()) && !PyLong_Check(v.ptr()))
    throw BadInput(r.python, shown(v), fmt::format("must be a number in [{}, {}]", r.lo, r.hi));
  const double x = PyFloat_AsDouble(v.ptr());
  if (x == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw BadInput(r.python, shown(v), fmt::format("must be a finite number in [{}, {}]", r.lo, r.hi));
  }
  check_python_option(r, x, shown(v));
  return x;
}

// An integer (operator.index: numpy's too, not a bool), or null after a BadInput-worthy mistake.
nb::object index_of(nb::handle v) {
  if (PyBool_Check(v.ptr())) return {};
  PyObject* i = PyNumber_Index(v.ptr());
  if (!i) PyErr_Clear();
  return nb::steal(i);
}

int whole_arg(const OptionRange& r, nb::handle v) {
  nb::object i = index_of(v);
  if (!i.is_valid())
    throw BadInput(r.python, shown(v), fmt::format("must be a whole number in [{}, {}]", r.lo, r.hi));
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0 || x < (long long)r.lo || x > (long long)r.hi)
    throw BadInput(r.python, shown(v), fmt::format("must be in [{}, {}]", r.lo, r.hi));
  return int(x);
}

uint64_t seed_arg(nb::handle v) {
  const char* why = "must be a whole number in [0, 2^64-1]";
  nb::object i = index_of(v);
  if (!i.is_valid()) throw BadInput("seed", shown(v), why);
  const unsigned long long x = PyLong_AsUnsignedLongLong(i.ptr());
  if (x == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw BadInput("seed", shown(v), why);
  }
  return uint64_t(x);
}

LayoutLimits limits(nb::handle max_mem_gib) {
  LayoutLimits lim;
  lim.max_bytes = int64_t(real_arg(kMaxMemGib, max_mem_gib) * double(int64_t(1) << 30));
  return with_stage_memory(lim);
}

// A float32 / int32 array over `data` of `shape` (no copy), kept alive by `owner`; without an owner the
// memory is valid only for the call it is handed to (a kernel's inputs during its run).
template <class T>
nb::object array_over(T* data, const std::vector<int64_t>& shape, nb::handle owner = {}) {
  std::vector<size_t> sh(shape.begin(), shape.end());
  return nb::cast(nb::ndarray<nb::numpy, T>(data, sh.size(), sh.data(), owner), nb::rv_policy::reference);
}

// A case and, for one made from a line, its trial (inputs generated once, kept for judge()). A view (the
// case a Python kernel is handed inside a run) holds only the layout: its inputs come with the call.
// `handed`: the copy of the trial's inputs that inputs() hands out (one per case, made at the first call);
// judge() compares it with the trial's to catch a write, then drops it (held arrays keep their copy).
struct PyCase {
  std::shared_ptr<Trial> trial;
  std::shared_ptr<const Layout> layout;
  std::string meta;
  LayoutLimits lim;
  std::shared_ptr<Inputs> handed;

  const Layout& l() const { return trial ? trial->layout() : *layout; }
};

PyCase make_case(const std::string& line, nb::handle max_mem_gib) {
  PyCase pc;
  pc.lim = limits(max_mem_gib);
  pc.trial = std::make_shared<Trial>(parse_case(line), pc.lim);
  pc.meta = case_meta_text(pc.trial->layout());
  return pc;
}

// Fresh sentinel outputs as arrays that own their memory (one heap Outputs behind all of them).
nb::dict sentinel_arrays(const Layout& l) {
  auto* out = new Outputs(make_sentinel_outputs(l));
  nb::capsule owner(out, [](void* p) noexcept { delete static_cast<Outputs*>(p); });
  nb::dict d;
  for (const auto& t : external_outputs(l)) {
    if (t.indices)
      d[t.name.c_str()] = array_over((out->*t.indices).data(), t.shape, owner);
    else
      d[t.name.c_str()] = array_over((out->*t.floats).data(), t.shape, owner);
  }
  return d;
}

// Inputs as writable arrays over `in`, a copy of a trial's inputs that the arrays own (a capsule holds it
// for as long as any of them lives: reading or writing one after its run or its case is gone is safe, and
// never reaches another case's inputs). The trial's own inputs are never handed out: a write, or a
// thread still writing after the kernel returned, changes only this copy, and input_difference() against
// the trial's names it.
nb::dict input_arrays(const Layout& l, std::shared_ptr<Inputs> in) {
  Inputs* data = in.get();
  nb::capsule owner(new std::shared_ptr<Inputs>(std::move(in)),
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<Inputs>*>(p); });
  nb::dict d;
  for (const auto& t : external_inputs(l)) {
    if (t.in_indices)
      d[t.name.c_str()] = array_over((data->*t.in_indices).data(), t.shape, owner);
    else
      d[t.name.c_str()] = array_over((data->*t.in).data(), t.shape, owner);
  }
  return d;
}

// A kernel's outputs (a mapping name -> array) into Outputs, checked against the output table: every
// required tensor present, dtype and shape exact, on the CPU and C-contiguous. Empty on success, else why
// not (the run is then an ERROR). Needs the GIL.
std::string take_outputs(const Layout& l, nb::handle got, Outputs& out) {
  if (!nb::isinstance<nb::dict>(got))
    return fmt::format("the kernel returned {}, not a dict of output arrays",
                       nb::cast<std::string>(nb::str(got.type())));
  nb::dict d = nb::borrow<nb::dict>(got);
  for (const auto& key : d.keys()) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    bool known = false;
    for (const auto& t : external_outputs(l)) known |= t.name == name;
    if (!known) return fmt::format("the kernel returned an unknown output '{}'", sanitize_utf8(name));
  }
  for (const auto& t : external_outputs(l)) {
    if (!d.contains(t.name.c_str())) {
      if (t.required) return fmt::format("output {} is missing", t.name);
      continue;
    }
    nb::ndarray<nb::ro> a;
    nb::object given = d[t.name.c_str()];
    if (!nb::try_cast(given, a, false))
      return fmt::format("output {} is not an array (buffer protocol or DLPack)", t.name);
    const bool want_int = t.indices != nullptr;
    if (a.device_type() != nb::device::cpu::value)
      return fmt::format("output {} is not in host memory (move it to the CPU first)", t.name);
    if (!(want_int ? a.dtype() == nb::dtype<int32_t>() : a.dtype() == nb::dtype<float>()))
      return fmt::format("output {} must be {}", t.name, want_int ? "int32" : "float32");
    bool shape_ok = a.ndim() == t.shape.size();
    for (size_t i = 0; shape_ok && i < a.ndim(); ++i) shape_ok = int64_t(a.shape(i)) == t.shape[i];
    std::string want = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) want += (i ? ", " : "") + std::to_string(t.shape[i]);
    want += "]";
    if (!shape_ok) return fmt::format("output {} must have shape {}", t.name, want);
    int64_t expect = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
      if (a.shape(i) > 1 && a.stride(i) != expect)
        return fmt::format("output {} is not C-contiguous", t.name);
      expect *= int64_t(a.shape(i));
    }
    const size_t n = size_t(expect);
    if (want_int) {
      auto& v = out.*t.indices;
      v.resize(n);
      std::memcpy(v.data(), a.data(), n * sizeof(int32_t));
    } else {
      auto& v = out.*t.floats;
      v.resize(n);
      std::memcpy(v.data(), a.data(), n * sizeof(float));
    }
  }
  return {};
}

// The Python exception being handled: "Type: message", then the last lines of its traceback.
std::string python_error_text(nb::python_error& e) {
  std::string head;
  try {
    head = nb::cast<std::string>(nb::handle(e.type()).attr("__name__")) + ": " +
           nb::cast<std::string>(nb::str(e.value()));
  } catch (...) {
    head = "an exception";
  }
  std::string tb = e.what();  // the traceback and the message
  if (tb.size() > 3000) tb = "..." + tb.substr(tb.size() - 3000);
  return sanitize_utf8(head + "\n" + tb);
}

// A Python callable kernel(case, inputs) -> outputs as a backend. It runs with the GIL; the harness
// around it (reference, comparators) runs without it. An exception is an ERROR naming it, never a pass;
// one carrying `skip_reason` (attn_oracle.Skip, the adapters' skip()) is a skip with that reason.
class PyBackend : public Backend {
 public:
  PyBackend(nb::object fn, std::string name) : fn_(std::move(fn)), name_(std::move(name)) {}
  ~PyBackend() override {
    nb::gil_scoped_acquire gil;
    fn_.reset();
  }
  std::string name() const override { return name_; }
  RunStatus run(const Layout& l, const Inputs& in, Outputs& out) override {
    nb::gil_scoped_acquire gil;
    // Ctrl-C while the harness ran without the GIL (Python's handler only set its flag): a stop, before
    // this kernel runs; interrupted() ends the gate or campaign, which blames nothing on the cut run.
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();
      request_stop(SIGINT);
      return {RunStatus::Error, name_ + " not run: interrupted (KeyboardInterrupt)", 0};
    }
    try {
      PyCase view;
      view.layout = std::make_shared<const Layout>(l);
      view.meta = case_meta_text(l);
      nb::object pycase = nb::module_::import_("attn_oracle").attr("Case").attr("_from_core")(view);
      auto mine = std::make_shared<Inputs>(in);
      nb::object inputs = input_arrays(l, mine);
      nb::object got = fn_(pycase, inputs);
      const std::string why = take_outputs(l, got, out);  // copied once, here: later writes change nothing
      if (auto what = input_difference(*mine, in); !what.empty())
        return {RunStatus::Error, fmt::format("{} wrote its input {}", name_, sanitize_utf8(what)), 0};
      if (!why.empty()) return {RunStatus::Error, name_ + ": " + why, 0};
      return {};
    } catch (nb::python_error& e) {
      if (e.matches(PyExc_KeyboardInterrupt)) {  // the user's stop, not the kernel's error
        request_stop(SIGINT);
        return {RunStatus::Error, name_ + " interrupted (KeyboardInterrupt)", 0};
      }
      if (e.matches(PyExc_BaseException)) {
        nb::object exc = nb::borrow(e.value());
        if (nb::hasattr(exc, "skip_reason")) {
          const std::string why = nb::cast<std::string>(nb::str(exc.attr("skip_reason")));
          return {RunStatus::Skipped, sanitize_utf8(why), 0};  // unjudged() names the backend
        }
      }
      return {RunStatus::Error, name_ + " raised " + python_error_text(e), 0};
    } catch (const std::exception& e) {
      return {RunStatus::Error, name_ + ": " + sanitize_utf8(e.what()), 0};
    }
  }

 private:
  nb::object fn_;
  std::string name_;
};

// A stop requested during a call (a KeyboardInterrupt in a kernel, or Ctrl-C while the harness ran):
// raised as KeyboardInterrupt once the GIL is back, with no verdict returned (nothing is blamed on the
// kernel). Each call starts with no request recorded. Needs the GIL.
void raise_if_interrupted() {
  if (interrupted() == 0) return;
  reset_interrupt();
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw nb::python_error();
}

// Outputs a caller already has (Case.judge): the run hands them over.
class GivenOutputs : public Backend {
 public:
  GivenOutputs(std::string name, Outputs out, std::string error)
      : name_(std::move(name)), out_(std::move(out)), error_(std::move(error)) {}
  std::string name() const override { return name_; }
  RunStatus run(const Layout& l, const Inputs&, Outputs& out) override {
    if (!error_.empty()) return {RunStatus::Error, name_ + ": " + error_, 0};
    // Only the tensors given replace the sentinel buffers (an optional one left out stays unwritten).
    for (const auto& t : external_outputs(l)) {
      if (t.indices && !(out_.*t.indices).empty()) out.*t.indices = std::move(out_.*t.indices);
      if (t.floats && !(out_.*t.floats).empty()) out.*t.floats = std::move(out_.*t.floats);
    }
    return {};
  }

 private:
  std::string name_;
  Outputs out_;
  std::string error_;
};

// The report directory of a call, opened (created, checked writable, locked) before any case runs, as the
// CLI's --report-dir: a bad folder is refused before the run, never after it with every verdict lost.
std::unique_ptr<ReportDir> open_report_dir(const std::string& dir) {
  return dir.empty() ? nullptr : std::make_unique<ReportDir>(dir);
}

// The backend a kernel argument names: a str is a registry spec ("cpu-ref", "cpu-bug:<model>", "exec:..."), run
// as the CLI runs it (and picklable for another process: pytest-xdist workers, Ray tasks); anything else is a
// Python callable.
std::shared_ptr<Backend> backend_for(nb::object kernel, const std::string& name) {
  if (nb::isinstance<nb::str>(kernel)) return make_backend(nb::cast<std::string>(kernel));
  return std::make_shared<PyBackend>(std::move(kernel), name);
}

std::string judge(PyCase& pc, nb::handle outputs, bool explain, const std::string& report_dir,
                  const std::string& vs_spec, const std::string& name) {
  if (!pc.trial) throw BadInput("case", "", "judge() needs a case made from a line (Case(line)), not the view a kernel is handed");
  Outputs out;
  std::string error = take_outputs(pc.l(), outputs, out);
  if (pc.handed) {  // the arrays of inputs() written since they were handed out: the next call gets a fresh copy
    if (auto what = input_difference(*pc.handed, pc.trial->inputs()); !what.empty()) {
      error = fmt::format("wrote its input {}", sanitize_utf8(what));
      pc.handed.reset();
    }
  }
  GivenOutputs given(name, std::move(out), std::move(error));
  auto vs = make_backend(vs_spec);
  auto rd = open_report_dir(report_dir);
  CaseResult r;
  {
    nb::gil_scoped_release nogil;
    r = run_trial(*pc.trial, given, *vs, !report_dir.empty(), explain);
  }
  if (rd) rd->write({r});
  return case_json(r, report_dir);
}

std::string run_kernel(PyCase& pc, nb::object fn, const std::string& name, bool explain,
                       const std::string& report_dir, const std::string& vs_spec) {
  if (!pc.trial) throw BadInput("case", "", "run() needs a case made from a line (Case(line))");
  auto be = backend_for(std::move(fn), name);
  auto vs = make_backend(vs_spec);
  auto rd = open_report_dir(report_dir);
  CaseResult r;
  reset_interrupt();
  {
    nb::gil_scoped_release nogil;
    r = run_trial(*pc.trial, *be, *vs, !report_dir.empty(), explain);
  }
  raise_if_interrupted();
  if (rd) rd->write({r});
  return case_json(r, report_dir);
}

// The corpus's cases (files or directories of *.case), each as (file, line, case line, claim).
nb::list corpus_cases(const std::vector<std::string>& paths, nb::handle max_mem_gib) {
  nb::list out;
  for (const auto& e : read_case_files(collect_case_files(paths), limits(max_mem_gib)))
    out.append(nb::make_tuple(e.file, e.line, print_case(e.c), e.claim));
  return out;
}

// gate: every case of the corpus through the kernel vs the reference, as `attn-oracle gate` runs them
// (a `# catches:` claim applied the same way). Returns (file:line, the case's verdict JSON) per case.
nb::list gate(nb::object fn, const std::string& name, const std::vector<std::string>& paths, bool explain,
              const std::string& report_dir, const std::string& vs_spec, nb::handle max_mem_gib) {
  const LayoutLimits lim = limits(max_mem_gib);
  const auto entries = read_case_files(collect_case_files(paths), lim);
  if (entries.empty()) throw BadInput("corpus", "", "no cases found in the given files");
  auto be = backend_for(std::move(fn), name);
  auto vs = make_backend(vs_spec);
  auto rd = open_report_dir(report_dir);
  std::vector<CaseResult> results;
  std::vector<std::string> where;
  reset_interrupt();
  {
    nb::gil_scoped_release nogil;
    for (const auto& e : entries) {
      CaseResult r = run_case(e.c, *be, *vs, lim, !report_dir.empty(), explain);
      if (interrupted() != 0) break;  // a run cut short proves nothing: no verdict kept
      if (!e.claim.empty()) {
        const CatchesClaim claim{e.claim, normalize_backend_spec(e.claim, SpecForm::Identity), e.file, e.claim_line};
        r.verdict = apply_claim(std::move(r.verdict), &claim, name).verdict;
      }
      results.push_back(std::move(r));
      where.push_back(fmt::format("{}:{}", e.file, e.line));
    }
  }
  raise_if_interrupted();
  if (rd) rd->write(results);
  nb::list out;
  for (size_t i = 0; i < results.size(); ++i)
    out.append(nb::make_tuple(where[i], case_json(results[i], report_dir)));
  return out;
}

// fuzz: a campaign of generated cases through the kernel, failures confirmed, shrunk and saved as found
// files exactly as `attn-oracle fuzz` does (the same run_campaign, the callable as its backend object).
nb::dict fuzz(nb::object fn, const std::string& name, const std::string& op, const std::string& budget, nb::handle seed,
              const std::string& out_dir, const std::string& vs_spec, nb::handle max_failures, nb::handle max_mem_gib,
              const std::string& dims, nb::handle shrink_runs, nb::handle confirm_runs, int shard, int shards) {
  CampaignOptions opt;
  opt.backend = name;
  if (!nb::isinstance<nb::str>(fn)) opt.backend_object = backend_for(std::move(fn), name);
  // The campaign's own split (case numbers shard, shard+shards, ...), as `attn-oracle fuzz --shard i/n`.
  opt.shard = shard;
  opt.shards = shards;
  if (shards < 1 || shard < 0 || shard >= shards)
    throw BadInput("shard", fmt::format("{}/{}", shard, shards), "expected 0 <= shard < shards");
  opt.vs = vs_spec;
  opt.seed = seed_arg(seed);
  opt.budget = parse_budget(budget);
  opt.out_dir = out_dir;
  opt.max_failures = whole_arg(kMaxFailures, max_failures);
  opt.shrink_runs = whole_arg(kShrinkRuns, shrink_runs);
  opt.confirm_runs = whole_arg(kConfirmRuns, confirm_runs);
  opt.lim = limits(max_mem_gib);
  opt.gen.op = parse_op_filter(op.empty() ? "any" : op);
  if (!dims.empty()) opt.gen.dims = parse_dims(dims);
  CampaignSummary s;
  std::ostringstream err;
  reset_interrupt();
  {
    nb::gil_scoped_release nogil;
    s = run_campaign(opt, err);
  }
  raise_if_interrupted();
  nb::dict d;
  d["cases"] = s.cases;
  d["passed"] = s.verdicts[Verdict::Pass];
  d["failed"] = s.verdicts.bad();
  d["skipped"] = s.verdicts[Verdict::Skipped];
  d["weak"] = s.verdicts.weak();
  d["weak_redrawn"] = s.weak_redrawn;
  d["invalid"] = s.invalid;
  d["seconds"] = s.seconds;
  nb::list found;
  for (const auto& f : s.unique) {
    nb::dict fd;
    fd["original"] = print_case(f.original);
    fd["shrunk"] = print_case(f.shrunk);
    fd["failing"] = failing_summary(f.shrunk_result.verdict);
    fd["signature"] = f.signature;
    fd["file"] = f.file.empty() ? nb::none() : nb::cast(f.file);
    fd["nondeterministic"] = f.nondeterministic();
    fd["index"] = f.index;
    fd["merged"] = f.merged;
    fd["already_known"] = f.already_known;
    fd["text"] = found_file_text(opt, f);  // the found file's text, saved elsewhere by save_found_text
    found.append(fd);
  }
  d["found"] = found;
  d["summary"] = format_summary(opt, s);
  d["errors"] = err.str();
  d["exit_code"] = campaign_exit_code(s);
  return d;
}

}  // namespace
}  // namespace ao

NB_MODULE(_core, m) {
  using namespace ao;
  m.doc() = "attn-oracle's C++ core (the package attn_oracle wraps it)";
  nb::exception<BadInput>(m, "BadInput", PyExc_ValueError);
  nb::exception<CaseFileError>(m, "CaseFileError", PyExc_ValueError);
  nb::exception<ReportDirError>(m, "ReportDirError", PyExc_OSError);

  nb::class_<PyCase>(m, "CoreCase")
      .def("__init__", [](PyCase* self, const std::string& line, nb::handle max_mem_gib) {
             new (self) PyCase(make_case(line, max_mem_gib));
           }, "line"_a, "max_mem_gib"_a)
      .def_prop_ro("line", [](const PyCase& pc) { return print_case(pc.l().c); })
      .def_prop_ro("meta_json", [](const PyCase& pc) { return pc.meta; })
      .def_prop_ro("has_inputs", [](const PyCase& pc) { return pc.trial != nullptr; })
      .def("inputs", [](nb::handle self) {
             PyCase& pc = nb::cast<PyCase&>(self);
             if (!pc.trial) throw BadInput("case", "", "a kernel's case view has no inputs of its own: use the inputs passed with it");
             if (!pc.handed) pc.handed = std::make_shared<Inputs>(pc.trial->inputs());
             return input_arrays(pc.l(), pc.handed);
           })
      .def("outputs", [](const PyCase& pc) { return sentinel_arrays(pc.l()); })
      .def("judge", &judge, "outputs"_a, "explain"_a, "report_dir"_a, "vs"_a, "name"_a)
      .def("run", &run_kernel, "kernel"_a, "name"_a, "explain"_a, "report_dir"_a, "vs"_a);
  m.def("corpus_cases", &corpus_cases, "paths"_a, "max_mem_gib"_a);
  m.def("gate", &gate, "kernel"_a, "name"_a, "paths"_a, "explain"_a, "report_dir"_a, "vs"_a, "max_mem_gib"_a);
  m.def("fuzz", &fuzz, "kernel"_a, "name"_a, "op"_a, "budget"_a, "seed"_a, "out_dir"_a, "vs"_a, "max_failures"_a,
        "max_mem_gib"_a, "dims"_a, "shrink_runs"_a, "confirm_runs"_a, "shard"_a = 0, "shards"_a = 1);
  m.def("save_found_text", [](const std::string& dir, const std::string& text, nb::handle max_mem_gib) {
          const SavedFound saved = save_found_text(dir, text, limits(max_mem_gib));
          return nb::make_tuple(saved.file, saved.already_known);
        }, "dir"_a, "text"_a, "max_mem_gib"_a = 8.0);
  m.def("smaller_case", [](const std::string& a, const std::string& b) {
          return smaller_case(parse_case(a), parse_case(b));
        }, "a"_a, "b"_a);
  m.def("normalize_case", [](const std::string& line) { return print_case(parse_case(line)); }, "line"_a);
}

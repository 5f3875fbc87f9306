// External backends: kernels that live outside this build.
//  * `exec:<command>`: a process of any language. The harness writes a fresh case directory
//    (protocol below), runs `/bin/sh -c '<command> "$@"' ao-exec <dir>` (so <command> is a shell
//    command line: quote as in sh; the directory is appended as the last argument and is also in
//    $AO_CASE_DIR) in its own process group under a timeout, and reads the outputs back.
//  * `plugin:<path.so>[:<knobs>]`: a shared library implementing attn_oracle/backends/plugin.h, loaded with
//    dlopen (the path holds no ':'; the text after the next ':' is handed to the plugin).
// Every way an external backend can go wrong is a RunStatus::Error naming the cause, never a crash,
// hang or leak of the harness: both run in supervised child processes (subprocess.h); a plugin's
// loading and each of its runs happen in a fresh exec of the host program attn-oracle-plugin-host
// (timeout AO_PLUGIN_TIMEOUT, default 600 s), which holds nothing of the harness.
//
// exec: case directory, protocol version 1:
//   case.txt     the canonical case line
//   meta.json    the case keys a kernel is given (from the key table), per-document lengths and ragged
//                offsets, cu_seqlens, per-segment rows and causal offsets (pos0), tensor files and shapes:
//                every field in docs/reference/meta-json.md (`attn-oracle keys --kernel --markdown`)
//   q.npy k.npy  inputs in the case dtype: fp32 '<f4', fp16 '<f2', bf16 stored as '<u2' bits
//   w.npy|v.npy  (float32 = bits << 16); pad slots hold the case's poison
//   o.npy lse.npy | topk.npy scores.npy
//                outputs, pre-filled with the sentinel (NaN payload 0x7fe5a5a5 / index -1515870810).
//                The process must rewrite o.npy+lse.npy ('<f4') or topk.npy ('<i4'); scores.npy
//                ('<f4') is optional. Shapes are exact (meta.json "outputs").
//   pass=bwd:    sdpa: dout.npy o.npy (case dtype) lse.npy ('<f4') in; dq.npy dk.npy dv.npy out.
//                indexer: topk.npy ('<i4', the exact forward's), target.npy predict.npy grad_loss.npy
//                ('<f4') in; dq.npy dk.npy dw.npy out, loss.npy ('<f4' [1]) optional.
//   exit 0: outputs are read and compared; exit 125: skipped (reason: last stderr line);
//   any other exit, a signal or the timeout: error with the stderr tail.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>
#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/plugin.h"

namespace ao {

struct ExecOptions {
  double timeout_s = 600;  // AO_EXEC_TIMEOUT
  bool keep_dir = false;   // AO_EXEC_KEEP=1 keeps case directories (their path is reported)
  std::string work_root;   // AO_EXEC_DIR, else $TMPDIR, else /tmp
};
// Reads AO_EXEC_TIMEOUT / AO_EXEC_KEEP / AO_EXEC_DIR; throws BadInput for a bad value.
ExecOptions exec_options_from_env();
std::unique_ptr<Backend> make_exec_backend(const std::string& command, const ExecOptions& opt);

// The tensors an external backend exchanges with the harness, by name: the exec: case directory's files
// and the Python package's arrays (python/) both come from these tables, so a new tensor is one entry
// here. Inputs are float32 in memory (exec: stores them in the case dtype); outputs as the backend writes
// them. Each entry names its field: `in` for an input, `floats` or `indices` for an output.
struct ExternalTensor {
  std::string name, descr;  // "q", "<f4"; outputs: "<f4" or "<i4"
  std::vector<int64_t> shape;
  bool required = true;     // outputs: a backend must write it (scores is optional)
  std::vector<float> Inputs::*in = nullptr;
  std::vector<float> Outputs::*floats = nullptr;
  std::vector<int32_t> Outputs::*indices = nullptr;
  std::vector<int32_t> Inputs::*in_indices = nullptr;  // an int32 input (the backward's top-k)
  bool exact_fp32 = false;  // an input exec: stores as float32 whatever the dtype (LSE, distributions)
};
std::vector<ExternalTensor> external_inputs(const Layout& l);
std::vector<ExternalTensor> external_outputs(const Layout& l);

// meta.json without its tensor files (JSON text; what an adapter reads of the case, in any process): the
// case keys a kernel sees, each at the path its key-table entry declares (CaseKey::kernel, case_keys.h),
// and the layout's fields (meta_layout_fields()).
std::string case_meta_text(const Layout& l);

// A meta.json field the layout's code writes (documents, offsets, segments, ...), not a case key's.
struct MetaField {
  const char* name;
  const char* doc;
  bool case_dir_only = false;  // written into an exec: case directory's meta.json only (tensor files)
  bool sometimes = false;      // written for some cases only
};
// Every such field: `attn-oracle keys --kernel` and docs/reference/meta-json.md list them, and the exec
// tests hold meta.json to them and the key table.
std::span<const MetaField> meta_layout_fields();

// The plugin ABI's ao_layout fields the case keys fill (CaseKey::kernel.abi_field names one): where it is
// and how the key's value is stored (an enum as its ordinal, which the AO_* constants follow; a bool 0/1).
struct PluginLayoutField {
  const char* name;
  size_t offset;
  enum Type { I32, I64, F64 } type;
};
std::span<const PluginLayoutField> plugin_layout_key_fields();
// The ao_layout a plugin is handed for l, less the pointers and counts of its arrays (the host places
// them): the case keys' fields from the key table, the buffer rows from the layout.
ao_layout plugin_layout(const Layout& l);

// Writes the case directory (inputs, meta.json, sentinel outputs); returns meta.json's text.
std::string write_case_dir(const std::string& dir, const Layout& l, const Inputs& in);

// `spec` is what follows "plugin:". Throws BadInput(key="backend") when the library cannot be
// loaded, lacks a required symbol or reports another ABI version (found by a probe in a child), and
// BadInput(key="AO_PLUGIN_TIMEOUT") for a bad timeout.
std::unique_ptr<Backend> make_plugin_backend(const std::string& spec);
// A plugin's knobs (`text`, after `plugin:<path>:`): the library reads them itself; the oracle holds them
// to the knob grammar and naming rule, and `bug=<id>` to the defect ids of the cpu-bug models (the old
// spelling of topleft-cp, without the -cp, is read as it). Throws BadInput(key="backend").
Knobs parse_plugin_knobs(const std::string& path, const std::string& text);
// Its name() after the checks that need no library code (path, knobs, AO_PLUGIN_TIMEOUT): nothing loaded.
std::string plugin_backend_name(const std::string& spec);

namespace detail {
std::vector<BackendInfo> external_backends();
}

}  // namespace ao

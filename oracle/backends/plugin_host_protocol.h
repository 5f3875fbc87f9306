// What the plugin: backend (plugin_backend.cpp) hands its host program (plugin_host/plugin_host.cpp,
// the executable attn-oracle-plugin-host) and what comes back. The host is exec'd (a fresh image: no
// reference answer, no other backend's outputs, no descriptor of the harness) with exactly:
//   fd 3  the supervisor's message pipe: the host writes one record (NUL-separated fields, magic first)
//   fd 4  a sealed memfd: Request, then the strings, the layout's arrays and the inputs. The host maps it
//         privately: a plugin that writes its inputs changes its own copy only.
//   fd 5  (runs only) a memfd for the outputs, mapped shared, pre-filled with the sentinels.
// Records: probe  {kProbeMagic, "ok", name, unavailable, abi version} | {kProbeMagic, "refused"|"broken", why}
//          run    {kDoneMagic, status, message}   (a load failure: status AO_PLUGIN_ERROR, "loading failed: ...")
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attn_oracle/backends/plugin.h"

namespace ao::plugin_host {

inline constexpr char kRequestMagic[16] = "AO-PLUGIN-REQ-2";
inline constexpr char kProbeMagic[] = "AO-PLUGIN-PROBE-2";
inline constexpr char kDoneMagic[] = "AO-PLUGIN-DONE-2";
inline constexpr char kProgramName[] = "attn-oracle-plugin-host";
inline constexpr int kMessageFd = 3, kRequestFd = 4, kOutputsFd = 5;

enum Mode : uint32_t { kProbe = 1, kRun = 2 };

struct Span {
  uint64_t off, n;  // offset in bytes; n: bytes for strings, elements for arrays
};

struct Request {
  char magic[16];
  uint32_t mode;
  uint32_t struct_size;  // sizeof(Request) of the harness
  Span path, knobs, case_line;
  ao_layout layout;  // its pointers are placed by the host
  Span docs, segments;
  // Inputs (n = 0: null), then outputs in the outputs memfd: the tensors of ao_tensors.
  Span q, k, v, w, dout, fwd_o, fwd_lse, fwd_topk, target, predict, grad_loss;
  Span topk, scores, o, lse, dq, dk, dv, dw, loss;
  uint64_t total;             // bytes of the request memfd
  uint64_t outputs_total;     // bytes of the outputs memfd
};

// The versions of plugin.h the host loads: a library of version 1 gets the version-1 prefix of ao_layout
// (struct_size AO_LAYOUT_V1_SIZE) and forward cases only.
inline constexpr uint32_t kOldestAbi = 1;
inline constexpr bool abi_has_backward(uint32_t v) { return v >= 2; }

// The Request field of each tensor the harness exchanges, by its name in the external tensor table
// (external_inputs / external_outputs, external.h: the exec: files' names); null for a name without one.
// The forward's outputs o, lse and topk are the backward's inputs fwd_o, fwd_lse and fwd_topk.
using SpanField = Span Request::*;
struct Slot {
  std::string_view name;
  SpanField field;
};
inline constexpr Slot kInputSlots[] = {
    {"q", &Request::q},           {"k", &Request::k},           {"v", &Request::v},
    {"w", &Request::w},           {"dout", &Request::dout},     {"o", &Request::fwd_o},
    {"lse", &Request::fwd_lse},   {"topk", &Request::fwd_topk}, {"target", &Request::target},
    {"predict", &Request::predict}, {"grad_loss", &Request::grad_loss}};
inline constexpr Slot kOutputSlots[] = {
    {"topk", &Request::topk}, {"scores", &Request::scores}, {"o", &Request::o},   {"lse", &Request::lse},
    {"dq", &Request::dq},     {"dk", &Request::dk},         {"dv", &Request::dv}, {"dw", &Request::dw},
    {"loss", &Request::loss}};
template <size_t N>
SpanField slot_of(const Slot (&table)[N], std::string_view name) {
  for (const Slot& s : table)
    if (s.name == name) return s.field;
  return nullptr;
}
inline SpanField input_slot(std::string_view name) { return slot_of(kInputSlots, name); }
inline SpanField output_slot(std::string_view name) { return slot_of(kOutputSlots, name); }

}  // namespace ao::plugin_host

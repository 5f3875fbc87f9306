// What the plugin: backend (plugin_backend.cpp) hands its host program (plugin_host/plugin_host.cpp,
// the executable attn-oracle-plugin-host) and what comes back. The host is exec'd (a fresh image: no
// reference answer, no other backend's outputs, no descriptor of the harness) with exactly:
//   fd 3  the supervisor's message pipe: the host writes one record (NUL-separated fields, magic first)
//   fd 4  a sealed memfd: Request, then the strings, the layout's arrays and the inputs. The host maps it
//         privately: a plugin that writes its inputs changes its own copy only.
//   fd 5  (runs only) a memfd for the outputs, mapped shared, pre-filled with the sentinels.
// Records: probe  {kProbeMagic, "ok", name, unavailable} | {kProbeMagic, "refused"|"broken", why}
//          run    {kDoneMagic, status, message}   (a load failure: status AO_PLUGIN_ERROR, "loading failed: ...")
#pragma once
#include <cstdint>

#include "attn_oracle/backends/plugin.h"

namespace ao::plugin_host {

inline constexpr char kRequestMagic[16] = "AO-PLUGIN-REQ-1";
inline constexpr char kProbeMagic[] = "AO-PLUGIN-PROBE-1";
inline constexpr char kDoneMagic[] = "AO-PLUGIN-DONE-1";
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
  Span q, k, v, w;            // fp32 inputs (n = 0: null)
  Span topk, scores, o, lse;  // in the outputs memfd (n = 0: null)
  uint64_t total;             // bytes of the request memfd
  uint64_t outputs_total;     // bytes of the outputs memfd
};

}  // namespace ao::plugin_host

// Plugins that misbehave in every way a foreign library can, for the supervisor's tests: one build per
// mode (CMake passes -DAO_HOSTILE_<mode>). Self-contained: includes only plugin.h. Every mode must end
// as an ERROR verdict (never a pass, a dead or hung harness):
//   exit_run / underscore_exit_run   exit(0) / _exit(0) inside ao_plugin_run
//   exit_ctor                        exit(0) in a library constructor (runs at dlopen)
//   segv / abort / stack             a null write, abort(), unbounded recursion
//   loop                             an endless loop in ao_plugin_run
//   abi_data                         ao_plugin_abi_version exported as data, not a function
//   msg_nonul                        fills the whole message buffer without a terminating NUL
//   zero_inputs                      zeroes q and w (casting away const) and returns the lowest allowed
//                                    keys: right for the zeroed inputs, wrong for the real ones
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "attn_oracle/backends/plugin.h"

namespace {

#ifdef AO_HOSTILE_exit_ctor
__attribute__((constructor)) void leave_at_load() { std::exit(0); }
#endif

#ifdef AO_HOSTILE_stack
int deeper(int n) {
  volatile char frame[4096];
  frame[0] = char(n);
  return deeper(n + 1) + frame[0];
}
#endif

#ifdef AO_HOSTILE_zero_inputs
void lowest_allowed_keys(const ao_layout* l, const ao_tensors* t) {
  for (int si = 0; si < l->num_segments; ++si) {
    const ao_segment& s = l->segments[si];
    const ao_doc& d = l->docs[s.doc];
    for (int64_t i = 0; i < s.rows; ++i) {
      int64_t hi = 0;
      if (i < s.valid) {
        const int64_t p = s.pos0 + i;
        hi = l->mask == AO_MASK_NONE ? d.kv_len : std::clamp<int64_t>((p + 1) / l->ratio, 0, d.kv_len);
      }
      for (int e = 0; e < l->topk; ++e) {
        t->topk[(s.row0 + i) * l->topk + e] = e < hi ? int32_t(d.kv_off + e) : -1;
        if (t->scores)
          t->scores[(s.row0 + i) * l->topk + e] = e < hi ? 0.f : -std::numeric_limits<float>::infinity();
      }
    }
  }
}
#endif

}  // namespace

extern "C" {

#ifdef AO_HOSTILE_abi_data
extern const uint32_t ao_plugin_abi_version;
const uint32_t ao_plugin_abi_version = AO_PLUGIN_ABI_VERSION;
#else
uint32_t ao_plugin_abi_version(void) { return AO_PLUGIN_ABI_VERSION; }
#endif

const char* ao_plugin_name(void) { return "hostile-plugin"; }

int ao_plugin_run(const ao_layout* l, const ao_tensors* t, const char*, char* msg, size_t n) {
#if defined(AO_HOSTILE_exit_run)
  std::exit(0);
#elif defined(AO_HOSTILE_underscore_exit_run)
  _exit(0);
#elif defined(AO_HOSTILE_segv)
  *static_cast<volatile int*>(nullptr) = 1;
#elif defined(AO_HOSTILE_abort)
  std::abort();
#elif defined(AO_HOSTILE_stack)
  return deeper(0);
#elif defined(AO_HOSTILE_loop)
  volatile unsigned spin = 0;
  for (;;) spin = spin + 1u;
#elif defined(AO_HOSTILE_msg_nonul)
  std::memset(msg, 'A', n);
  return AO_PLUGIN_ERROR;
#elif defined(AO_HOSTILE_zero_inputs)
  if (l->op == AO_OP_INDEXER) {
    std::memset(const_cast<float*>(t->q), 0, size_t(l->q_rows) * size_t(l->heads) * size_t(l->dim) * sizeof(float));
    std::memset(const_cast<float*>(t->w), 0, size_t(l->q_rows) * size_t(l->heads) * sizeof(float));
    std::memset(const_cast<float*>(t->k), 0, size_t(l->kv_rows) * size_t(l->dim) * sizeof(float));
    lowest_allowed_keys(l, t);
    return AO_PLUGIN_OK;
  }
#endif
  (void)l, (void)t, (void)msg, (void)n;
  return AO_PLUGIN_ERROR;
}

}  // extern "C"

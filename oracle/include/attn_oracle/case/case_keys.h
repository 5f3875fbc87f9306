// The case-key table: every case-line key is declared once, here (case_keys.cpp), with the ops it
// applies to, a one-line doc, its default, how its value is parsed into the Case and printed
// canonically, and how the structural shrinker treats it. parse_case / print_case (case_line.cpp),
// `attn-oracle keys` and the key table (`attn-oracle keys --markdown`, docs/reference/case-keys.md) all read it.
//
// A new key: add a Case field (case.h), one entry in case_keys.cpp, its semantics where the layout,
// inputs or references use it, and tests. A key a kernel is given (`meta`, `abi_field`) reaches the exec:
// protocol's meta.json, the plugin ABI's ao_layout, the Python package's Case and the adapters' CaseMeta
// from its entry alone (`attn-oracle keys --kernel`, docs/reference/meta-json.md).
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "attn_oracle/case/case.h"

namespace ao {

// The ops a key applies to; given with another op it is an error naming the key.
enum class KeyOps { Both, Indexer, Sdpa };
bool key_applies(KeyOps ops, Op op);

// How the structural shrinker (fuzz/src/shrink.cpp) treats a key.
enum class KeyShrink {
  ToDefault,   // one candidate: the key reset to its default (when it is not already)
  Structural,  // hand-written edits in shrink.cpp (documents, lengths, pads, offsets, dims, cp, rows)
  Keep,        // never changed (the op; tolerance overrides and probe decide what fails)
};

// A key's value as a kernel is given it: an enum as its name (meta.json) and its ordinal (the plugin
// ABI's AO_* constants follow the enums' order), a bool as 0/1 to the plugin.
struct EnumValue {
  std::string name;
  int ordinal = 0;
};
using KeyValue = std::variant<int64_t, double, bool, EnumValue>;

// How a kernel sees a key. A key with a `meta` path is written into meta.json at that path (dots into
// objects: "cp.size") with its value, from this table; a key without one reaches a kernel only through
// the layout fields named in `via` (documents, offsets, segments: written by the layout's code), or not
// at all (seed, tolerances: the harness's side).
struct KernelView {
  const char* meta = nullptr;       // meta.json path; nullptr: not written from the table
  const char* abi_field = nullptr;  // the ao_layout field (attn_oracle/backends/plugin.h) it fills; nullptr: none
  std::optional<KeyOps> meta_ops;   // the ops whose meta.json carries it; nullopt: the key's own ops
  std::optional<Pass> only_pass;    // carried under this pass only (loss_mean: pass=bwd)
  const char* via = nullptr;        // the meta.json fields the layout writes from it ("q_lens, docs")
  // The value a kernel is given, from the case the layout resolved (kernel_case(), layout.h: scale and
  // max_seqlen filled in).
  std::function<KeyValue(const Case& resolved)> value;
};

struct CaseKey {
  const char* name;
  KeyOps ops;
  std::string doc;          // one line, for `keys` and docs/reference/case-keys.md
  KeyShrink shrink;
  // Parses `value` into the Case; throws CaseError naming `key` and the value.
  std::function<void(Case& c, const std::string& key, const std::string& value)> parse;
  // The canonical value text, or nullopt when the key is omitted from the line (d = canonical_defaults(c):
  // the value is the default, or another key prints it, e.g. `docs` for equal q_lens and kv_lens).
  std::function<std::optional<std::string>(const Case& c, const Case& d)> print;
  // Sets the key's fields to their defaults (d = defaults_for(c.op)).
  std::function<void(Case& c, const Case& d)> reset;
  std::string default_text;  // the default as `keys` shows it (per op where it differs)
  // For a both-buffer key (docs, pad, padded_offsets, capacity): its per-buffer keys, q then kv.
  // Given together with one of them, one would silently override the other: an error.
  const char* q_key = nullptr;
  const char* kv_key = nullptr;
  const char* alias_of = nullptr;  // another name of that key (lens = docs): never printed
  bool needs_cp = false;           // acts only under context parallelism (cp > 1)
  KernelView kernel;               // how a kernel sees it (meta.json, plugin ABI)
};

// Every key, in canonical print order (op first).
std::span<const CaseKey> case_key_table();
// The key named `name`, or nullptr.
const CaseKey* find_case_key(std::string_view name);
// The ops a key applies to, as `keys` shows them: "both", "indexer" or "sdpa".
const char* key_ops_text(KeyOps ops);
// Whether the meta.json of case c carries key k at its `meta` path.
bool meta_carries(const CaseKey& k, const Case& c);

// defaults_for(c.op) with the defaults that follow other keys resolved from c (hkv = hq, dim_v = dim).
Case canonical_defaults(const Case& c);

}  // namespace ao

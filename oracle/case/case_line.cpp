// Case-line parser and canonical printer over the key table (case_keys.cpp): tokens, repeated and
// unknown keys, cross-key checks. Value-level validation (numbers, enums, ranges of single keys) is
// the table's; structural validation (offsets, CP divisibility, memory) is layout.cpp's.
#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "attn_oracle/case/case.h"
#include "attn_oracle/case/case_keys.h"

namespace ao {

std::string strip_utf8_bom(const std::string& line) {
  return line.rfind("\xEF\xBB\xBF", 0) == 0 ? line.substr(3) : line;
}

Case defaults_for(Op op) {
  Case c;
  c.op = op;
  if (op == Op::Indexer) {
    c.heads = 4; c.dim = 32; c.topk = 64; c.mask = MaskKind::BottomRight;
    c.q_lens = c.kv_lens = {512};
  } else {
    c.hq = 4; c.hkv = 0; c.dim = 64; c.dim_v = 0; c.mask = MaskKind::TopLeft;
    c.q_lens = c.kv_lens = {256};
  }
  return c;
}

Case parse_case(const std::string& line) {
  std::vector<std::pair<const CaseKey*, std::string>> kvs;
  std::istringstream is(strip_utf8_bom(line));
  std::string tok;
  std::map<std::string, std::string> seen;  // key -> value
  Case c;
  while (is >> tok) {
    if (tok[0] == '#') break;  // trailing comment
    // Control bytes (NUL would truncate the message) are shown as '?' in the key/value reported.
    if (std::any_of(tok.begin(), tok.end(), [](char ch) { return (unsigned char)ch < 0x20 || ch == 0x7f; })) {
      std::string shown = tok;
      for (auto& ch : shown) if ((unsigned char)ch < 0x20 || ch == 0x7f) ch = '?';
      const size_t e = shown.find('=');
      throw CaseError(e == std::string::npos || e == 0 ? shown : shown.substr(0, e),
                      e == std::string::npos ? "" : shown.substr(e + 1), "contains a control byte (shown as ?)");
    }
    size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CaseError(tok, "", "expected key=value");
    std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (!seen.emplace(k, v).second) throw CaseError(k, v, "key given twice");
    const CaseKey* key = find_case_key(k);
    if (!key) throw CaseError(k, v, "unknown key (see `attn-oracle keys`)");
    if (k == "op") {  // first: the other keys' defaults and op checks depend on it
      key->parse(c, k, v);
      continue;
    }
    kvs.emplace_back(key, v);
  }
  c = defaults_for(c.op);
  for (const auto& [key, v] : kvs) {
    if (!key_applies(key->ops, c.op))
      throw CaseError(key->name, v, fmt::format("applies only to op={}", key_ops_text(key->ops)));
    key->parse(c, key->name, v);
  }
  // A both-buffer key with one of its per-buffer keys (or two names of one key): one would silently
  // override the other, depending on key order.
  for (const auto& [key, v] : kvs) {
    if (key->alias_of && seen.count(key->alias_of))
      throw CaseError(key->name, v, fmt::format("same key as {}: give one of them", key->alias_of));
    if (key->q_key)
      for (const char* side : {key->q_key, key->kv_key})
        if (seen.count(side))
          throw CaseError(side, seen.at(side),
                          fmt::format("give {}, or {} / {}, not both", key->name, key->q_key, key->kv_key));
  }
  // Keys that only act under context parallelism: without cp > 1 they would be silently ignored.
  // (The values that differ from the default are rejected again by make_layout, for built cases.)
  if (c.cp == 1)
    for (const auto& [key, v] : kvs)
      if (key->needs_cp) throw CaseError(key->name, v, "applies only under context parallelism (cp > 1)");
  // One side given alone: the other follows it.
  if (seen.count("q_lens") && !seen.count("kv_lens")) c.kv_lens = c.q_lens;
  if (seen.count("kv_lens") && !seen.count("q_lens")) c.q_lens = c.kv_lens;
  if (c.hkv == 0) c.hkv = c.hq;
  if (c.dim_v == 0) c.dim_v = c.dim;
  return c;
}

std::string print_case(const Case& c) {
  const Case d = canonical_defaults(c);
  std::string s;
  for (const auto& k : case_key_table()) {
    if (!key_applies(k.ops, c.op)) continue;
    if (const auto v = k.print(c, d)) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k.name, *v);
  }
  return s;
}

}  // namespace ao

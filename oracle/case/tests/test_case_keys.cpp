// The case-key table (case_keys.h) and the enum names (enum_names.h):
//  * every key rejects a malformed value, a wrong op and (where it needs one) cp = 1 with a CaseError
//    naming it, and the CLI exits 2 naming the key and the value;
//  * the enum names round-trip and every alias parses;
//  * `attn-oracle keys` lists every key with its ops and default, and `keys --markdown` is its table
//    (docs/reference/case-keys.md is that output, checked by CTest `docs_generated`).
// The random round trip over every key is CaseLine.RandomLinesParseAndRoundTrip (test_case_line.cpp),
// with CaseLine.RandomLinesCoverEveryKey checking that its lines use every key of the table.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/case/enum_names.h"
#include "cli_run.h"

using namespace ao;

namespace {

Op applicable_op(const CaseKey& k) { return k.ops == KeyOps::Sdpa ? Op::Sdpa : Op::Indexer; }
Op other_op(const CaseKey& k) { return k.ops == KeyOps::Sdpa ? Op::Indexer : Op::Sdpa; }

CaseError parse_error(const std::string& line) {
  try {
    (void)parse_case(line);
  } catch (const CaseError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << line;
  return CaseError("", "", "");
}

}  // namespace

TEST(CaseKeys, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const auto& k : case_key_table()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_EQ(find_case_key(k.name), &k);
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_FALSE(k.default_text.empty()) << k.name;
    if (k.shrink == KeyShrink::ToDefault) {
      EXPECT_TRUE(bool(k.reset)) << k.name;
    }
    for (const char* side : {k.q_key, k.kv_key, k.alias_of}) {
      if (side) {
        EXPECT_NE(find_case_key(side), nullptr) << k.name << " -> " << side;
      }
    }
  }
  EXPECT_EQ(find_case_key("nope"), nullptr);
  EXPECT_EQ(std::string(case_key_table()[0].name), "op");  // printed first
}

TEST(CaseKeys, EveryKeyRejectsABadValueNamingIt) {
  for (const auto& k : case_key_table()) {
    for (const std::string bad : {"x!", "", "1x"}) {
      const std::string line = std::string(k.name) == "op"
                                   ? "op=" + bad
                                   : fmt::format("op={} {}={}", to_string(applicable_op(k)), k.name, bad);
      SCOPED_TRACE(line);
      const CaseError e = parse_error(line);
      EXPECT_EQ(e.key, k.name) << e.what();
      EXPECT_EQ(e.value, bad) << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("'{}' = '{}'", k.name, bad)), std::string::npos) << e.what();
    }
  }
}

TEST(CaseKeys, OpSpecificAndCpOnlyKeysAreRejectedElsewhere) {
  int op_specific = 0, cp_only = 0;
  for (const auto& k : case_key_table()) {
    if (k.ops != KeyOps::Both) {
      ++op_specific;
      const std::string line = fmt::format("op={} {}=1", to_string(other_op(k)), k.name);
      SCOPED_TRACE(line);
      const CaseError e = parse_error(line);
      EXPECT_EQ(e.key, k.name);
      EXPECT_NE(std::string(e.what()).find(fmt::format("applies only to op={}", key_ops_text(k.ops))),
                std::string::npos)
          << e.what();
    }
    if (k.needs_cp) {
      ++cp_only;
      const std::string line = fmt::format("op={} {}={}", to_string(applicable_op(k)), k.name, k.default_text);
      SCOPED_TRACE(line);
      const CaseError e = parse_error(line);
      EXPECT_EQ(e.key, k.name);
      EXPECT_NE(std::string(e.what()).find("cp > 1"), std::string::npos) << e.what();
      EXPECT_NO_THROW(parse_case(line + " cp=2"));
    }
  }
  EXPECT_GE(op_specific, 10);
  EXPECT_EQ(cp_only, 2);  // cp_scheme, crop
}

// A both-buffer key with one of its per-buffer keys, or both names of one key: an error naming one.
TEST(CaseKeys, BothBufferKeysAndAliasesConflict) {
  int checked = 0;
  for (const auto& k : case_key_table()) {
    for (const char* other : {k.q_key, k.kv_key, k.alias_of}) {
      if (!other) continue;
      ++checked;
      const std::string line = fmt::format("op=sdpa {}=3 {}=3", k.name, other);
      SCOPED_TRACE(line);
      const CaseError e = parse_error(line);
      EXPECT_TRUE(e.key == k.name || e.key == other) << e.what();
    }
  }
  EXPECT_EQ(checked, 11);  // docs, lens (+ its alias), pad, padded_offsets, capacity
}

TEST(EnumNames, RoundTripAndAliases) {
  auto check = [](auto tag) -> size_t {
    using E = decltype(tag);
    std::set<E> values;
    for (const auto& n : enum_names<E>()) {
      SCOPED_TRACE(n.name);
      EXPECT_EQ(parse_enum<E>(n.name), n.value);
      EXPECT_EQ(parse_enum<E>(to_string(n.value)), n.value);
      values.insert(n.value);
    }
    EXPECT_FALSE(parse_enum<E>("bogus").has_value());
    EXPECT_FALSE(parse_enum<E>("").has_value());
    return values.size();
  };
  EXPECT_EQ(check(Op{}), 2u);
  EXPECT_EQ(check(MaskKind{}), 3u);
  EXPECT_EQ(check(CpScheme{}), 2u);
  EXPECT_EQ(check(Poison{}), 4u);
  EXPECT_EQ(check(Precision{}), 2u);
  EXPECT_EQ(check(PadWrites{}), 2u);
  EXPECT_EQ(check(Probe{}), 2u);
  EXPECT_EQ(check(DType{}), 3u);
  EXPECT_EQ(parse_enum<MaskKind>("causal"), MaskKind::TopLeft);  // alias
  EXPECT_STREQ(to_string(MaskKind::TopLeft), "topleft");          // canonical
  EXPECT_EQ(enum_choices<MaskKind>(), "none|topleft|causal|bottomright");
}

TEST(CaseKeysCli, BadValuesExitTwoNamingTheKeyAndValue) {
  for (const auto& k : case_key_table()) {
    const std::string args = std::string(k.name) == "op" ? "repro op=bad_op"
                             : fmt::format("repro op={} {}=bad_{}", to_string(applicable_op(k)), k.name, k.name);
    SCOPED_TRACE(args);
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(fmt::format("case key '{}' = 'bad_{}'", k.name, k.name)), std::string::npos) << r.out;
  }
  const auto r = test::run_cli("repro op=sdpa windw=4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("case key 'windw' = '4': unknown key (see `attn-oracle keys`)"), std::string::npos) << r.out;
}

TEST(CaseKeysCli, KeysListsEveryKeyWithOpsAndDefault) {
  const auto r = test::run_cli("keys");
  ASSERT_EQ(r.code, 0) << r.out;
  std::istringstream is(r.out);
  std::string line;
  std::getline(is, line);
  EXPECT_EQ(line.rfind("key ", 0), 0u) << line;  // header
  for (const auto& k : case_key_table()) {
    ASSERT_TRUE(std::getline(is, line)) << k.name;
    std::istringstream ls(line);
    std::string name, ops;
    ls >> name >> ops;
    EXPECT_EQ(name, k.name);
    EXPECT_EQ(ops, key_ops_text(k.ops));
    EXPECT_NE(line.find("  " + k.default_text + "  "), std::string::npos) << line;
    EXPECT_NE(line.find(k.doc), std::string::npos) << line;
  }
  EXPECT_FALSE(std::getline(is, line)) << "extra line: " << line;
  const auto md = test::run_cli("keys --markdown");
  ASSERT_EQ(md.code, 0) << md.out;
  EXPECT_EQ(md.out.rfind("| key | ops | default | meaning |\n| --- | --- | --- | --- |\n", 0), 0u) << md.out;
  for (const auto& k : case_key_table())
    EXPECT_NE(md.out.find(fmt::format("\n| `{}` | {} | ", k.name, key_ops_text(k.ops))), std::string::npos) << k.name;
  EXPECT_EQ(std::count(md.out.begin(), md.out.end(), '\n'), std::ptrdiff_t(case_key_table().size() + 2));
}

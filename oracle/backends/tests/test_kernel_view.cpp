// What a kernel is given of a case comes from the key table (CaseKey::kernel, case_keys.cpp): every key
// with a meta.json path is in meta.json at that path with its value, only where it is carried; every key
// with a plugin ABI field fills that ao_layout field; every meta.json field is a key's or one of
// meta_layout_fields(). A key declared with a path the layout's writer also fills, or with an ABI field
// plugin_layout_key_fields() lacks, fails here (python/tests/test_case_meta.py holds Python's side).
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attn_oracle/backends/external.h"
#include "attn_oracle/case/case_keys.h"
#include "attn_oracle/layout/layout.h"

namespace ao {
namespace {

using nlohmann::json;

// Both ops and passes, CP, and every kernel-visible key away from its default somewhere.
const char* const kLines[] = {
    "op=indexer docs=64,32 heads=2 dim=8 topk=4 ratio=2 mask=bottomright ties=strict dtype=bf16 poison=large "
    "pad_writes=allow max_seqlen_q=80 seed=3",
    "op=indexer pass=bwd docs=32 heads=2 dim=8 topk=4 loss_mean=valid grad_pad=zero dtype=fp16 seed=4",
    "op=sdpa docs=16,8 hq=4 hkv=2 dim=8 dim_v=16 window=3 window_right=2 window_convention=fa num_splits=2 "
    "empty_rows=posinf max_seqlen_kv=24 scale=0.5 poison=inf seed=5",
    "op=sdpa pass=bwd docs=16 hq=2 dim=8 cp=2 rank=1 cp_scheme=contiguous crop=1 mask=topleft grad_pad=zero seed=6",
};

std::string pointer(const char* path) {
  std::string p = "/";
  for (const char* at = path; *at; ++at) p += *at == '.' ? '/' : *at;
  return p;
}

json as_json(const KeyValue& v) {
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, EnumValue>) {
          return x.name;
        } else {
          return x;
        }
      },
      v);
}

double as_number(const KeyValue& v) {
  return std::visit(
      [](const auto& x) -> double {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, EnumValue>) {
          return x.ordinal;
        } else {
          return double(x);
        }
      },
      v);
}

// The first name of each comma-separated item of a `via` text ("docs (o_off), rows" -> docs, rows).
std::vector<std::string> via_fields(const char* via) {
  std::vector<std::string> out;
  std::string s = via;
  for (size_t at = 0; at <= s.size();) {
    size_t comma = s.find(',', at);
    std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    item.erase(0, item.find_first_not_of(' '));
    item = item.substr(0, item.find_first_of(" ("));
    out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

TEST(KernelView, MetaJsonCarriesEveryKernelKeyAtItsPathWithItsValue) {
  for (const char* line : kLines) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const json m = json::parse(case_meta_text(l));
    const Case resolved = kernel_case(l);
    std::set<std::string> from_keys;
    for (const CaseKey& k : case_key_table()) {
      if (k.kernel.via) {
        for (const auto& f : via_fields(k.kernel.via)) {
          EXPECT_TRUE(m.contains(f)) << "case key " << k.name << " is seen via meta.json field " << f
                                     << ", which meta.json lacks";
        }
      }
      if (!k.kernel.meta) continue;
      const json::json_pointer at(pointer(k.kernel.meta));
      if (!meta_carries(k, l.c)) {
        EXPECT_FALSE(m.contains(at)) << "case key " << k.name << " is not carried for this case, yet meta.json has "
                                     << k.kernel.meta;
        continue;
      }
      from_keys.insert(std::string(k.kernel.meta).substr(0, std::string(k.kernel.meta).find('.')));
      ASSERT_TRUE(m.contains(at)) << "case key " << k.name << ": meta.json lacks " << k.kernel.meta;
      EXPECT_EQ(m[at], as_json(k.kernel.value(resolved)))
          << "case key " << k.name << ": meta.json's " << k.kernel.meta
          << " is not the key's value (another field's writer overwrote it?)";
    }
    std::set<std::string> layout_fields, always;
    for (const MetaField& f : meta_layout_fields()) {
      EXPECT_FALSE(from_keys.count(f.name)) << "meta.json field " << f.name << " is a layout field and a case key's";
      if (f.case_dir_only) continue;
      layout_fields.insert(f.name);
      if (!f.sometimes) always.insert(f.name);
    }
    for (const auto& [name, value] : m.items())
      EXPECT_TRUE(from_keys.count(name) || layout_fields.count(name))
          << "meta.json field " << name << " is neither a case key's (case_keys.cpp) nor in meta_layout_fields()";
    for (const auto& name : always) EXPECT_TRUE(m.contains(name)) << "meta.json lacks the layout field " << name;
  }
}

TEST(KernelView, PluginLayoutHoldsEveryAbiKeyInItsField) {
  std::set<std::string> named;
  for (const char* line : kLines) {
    SCOPED_TRACE(line);
    const Layout l = make_layout(parse_case(line));
    const Case resolved = kernel_case(l);
    ao_layout al{};
    ASSERT_NO_THROW(al = plugin_layout(l));
    for (const CaseKey& k : case_key_table()) {
      if (!k.kernel.abi_field) continue;
      named.insert(k.kernel.abi_field);
      const PluginLayoutField* f = nullptr;
      for (const auto& x : plugin_layout_key_fields())
        if (std::string(x.name) == k.kernel.abi_field) f = &x;
      ASSERT_TRUE(f) << "case key " << k.name << " names ao_layout field " << k.kernel.abi_field
                     << ", which plugin_layout_key_fields() lacks";
      const char* at = reinterpret_cast<const char*>(&al) + f->offset;
      double got = 0;
      if (f->type == PluginLayoutField::F64) {
        std::memcpy(&got, at, sizeof got);
      } else if (f->type == PluginLayoutField::I64) {
        int64_t v;
        std::memcpy(&v, at, sizeof v);
        got = double(v);
      } else {
        int32_t v;
        std::memcpy(&v, at, sizeof v);
        got = v;
      }
      EXPECT_EQ(got, as_number(k.kernel.value(resolved))) << "case key " << k.name << ": ao_layout." << f->name;
    }
    EXPECT_EQ(al.q_rows, l.q_rows);
    EXPECT_EQ(al.kv_rows, l.kv_rows);
    EXPECT_EQ(al.struct_size, sizeof(ao_layout));
  }
  for (const auto& f : plugin_layout_key_fields())
    EXPECT_TRUE(named.count(f.name)) << "ao_layout field " << f.name << " is filled by no case key";
}

// The values a kernel was given before the table drove them, for one case: meta.json's and ao_layout's.
TEST(KernelView, ValuesAreTheProtocolsSpelling) {
  const Layout l = make_layout(parse_case(kLines[3]));
  const json m = json::parse(case_meta_text(l));
  EXPECT_EQ(m["cp"], json({{"size", 2}, {"rank", 1}, {"scheme", "contiguous"}, {"crop", true}}));
  EXPECT_EQ(m["dims"], json({{"hq", 2}, {"hkv", 2}, {"dim", 8}, {"dim_v", 8}}));
  EXPECT_EQ(m["max_seqlen"], json({{"q", l.max_seqlen_q}, {"kv", l.max_seqlen_kv}}));
  EXPECT_EQ(m["scale"], l.scale);
  EXPECT_EQ(m["pass"], "bwd");
  EXPECT_FALSE(m.contains("loss_mean"));  // the indexer's backward only
  const ao_layout al = plugin_layout(l);
  EXPECT_EQ(al.op, AO_OP_SDPA);
  EXPECT_EQ(al.pass, AO_PASS_BWD);
  EXPECT_EQ(al.cp_scheme, AO_CP_CONTIGUOUS);
  EXPECT_EQ(al.crop, 1);
  EXPECT_EQ(al.grad_pad_zero_allowed, 1);
  EXPECT_EQ(al.mask, AO_MASK_TOPLEFT);
  EXPECT_EQ(al.scale, l.scale);
  const json mi = json::parse(case_meta_text(make_layout(parse_case(kLines[0]))));
  EXPECT_TRUE(mi.contains("window") && mi.contains("num_splits"));  // the SDPA conventions, for the indexer too
  EXPECT_EQ(mi["dims"], json({{"heads", 2}, {"dim", 8}, {"topk", 4}, {"ratio", 2}}));
  EXPECT_EQ(mi["mask"], "bottomright");
  EXPECT_EQ(mi["max_seqlen"]["q"], 80);
  const ao_layout ai = plugin_layout(make_layout(parse_case(kLines[0])));
  EXPECT_EQ(ai.dtype, AO_DTYPE_BF16);
  EXPECT_EQ(ai.ties_strict, 1);
  EXPECT_EQ(ai.pad_writes_allowed, 1);
  EXPECT_EQ(ai.max_seqlen_q, 80);
}

}  // namespace
}  // namespace ao

// The one knob grammar (knobs.h): `k=v,k=v` against KnobSpecs, defaults, ranges, aliases, the naming
// rule, and errors that name the knob and the value.
#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/knobs.h"
#include "attn_oracle/case/case.h"

using namespace ao;

namespace {

const std::vector<KnobSpec> kSpecs = {
    bug_knob({"topleft-cp", "tail-read"}),
    knob_choice("inputs", {"device", "host"}, "where inputs come from"),
    knob_number("scratch_gib", {0, 64, true, false}, "4", "scratch"),
    knob_number("guard", {0, 1 << 20, false, true}, "64", "guard rows"),
};

// The BadInput's message for `text`, or "" when it parses.
std::string error_of(const std::string& text, bool open = false) {
  try {
    parse_knobs("demo", text, kSpecs, {{"mask=topleft", "bug=topleft-cp"}}, open);
  } catch (const BadInput& e) {
    EXPECT_EQ(e.key, "backend");
    EXPECT_EQ(e.value, "demo:" + text);
    return e.what();
  }
  return {};
}

TEST(Knobs, DefaultsValuesAndCanonicalText) {
  const Knobs none = parse_knobs("demo", "", kSpecs);
  EXPECT_EQ(none.text(), "");
  EXPECT_EQ(none.get("bug"), "none");
  EXPECT_EQ(none.get("inputs"), "device");
  EXPECT_EQ(none.number("scratch_gib"), 4);
  EXPECT_EQ(none.number("guard"), 64);
  EXPECT_FALSE(none.given("bug"));

  const Knobs k = parse_knobs("demo", "inputs=host,bug=tail-read,scratch_gib=0.5,guard=0", kSpecs);
  EXPECT_EQ(k.text(), "inputs=host,bug=tail-read,scratch_gib=0.5,guard=0");
  EXPECT_EQ(k.get("bug"), "tail-read");
  EXPECT_EQ(k.number("scratch_gib"), 0.5);
  EXPECT_EQ(k.number("guard"), 0);
  EXPECT_TRUE(k.given("inputs"));
}

TEST(Knobs, BadTextIsABadInputNamingTheKnobAndTheValue) {
  struct Bad {
    const char* text;
    std::vector<const char*> says;
  };
  const Bad bad[] = {
      {"colour=red", {"unknown knob 'colour'", "'red'", "known: bug, inputs, scratch_gib, guard"}},
      {"bug=topleft", {"knob bug", "'topleft'", "none|topleft-cp|tail-read"}},
      {"inputs=disk", {"knob inputs", "'disk'", "device|host"}},
      {"scratch_gib=0", {"knob scratch_gib", "'0'", "(0, 64]"}},
      {"scratch_gib=65", {"knob scratch_gib", "'65'"}},
      {"scratch_gib=nan", {"knob scratch_gib", "'nan'"}},
      {"scratch_gib=", {"knob scratch_gib", "''"}},
      {"guard=1.5", {"knob guard", "'1.5'", "an integer in [0, 1048576]"}},
      {"guard=-1", {"knob guard", "'-1'"}},
      {"inputs", {"knob 'inputs' is not knob=value"}},
      {"=host", {"knob '=host' is not knob=value"}},
      {"inputs=host,", {"knob '' is not knob=value"}},
      {"inputs=host,inputs=device", {"knob inputs given twice", "'device'"}},
      {"mask=topleft,bug=none", {"knob bug given twice"}},  // the alias counts as bug=
  };
  for (const auto& b : bad) {
    const std::string what = error_of(b.text);
    ASSERT_FALSE(what.empty()) << b.text << " was accepted";
    for (const char* s : b.says) EXPECT_NE(what.find(s), std::string::npos) << b.text << ": " << what;
  }
  // A backend without knobs refuses any.
  EXPECT_THROW(parse_knobs("cpu-ref", "x=1", {}), BadInput);
  EXPECT_NO_THROW(parse_knobs("cpu-ref", "", {}));
}

TEST(Knobs, AliasIsReadAsTheCanonicalSpelling) {
  const Knobs k = parse_knobs("demo", "inputs=host,mask=topleft", kSpecs, {{"mask=topleft", "bug=topleft-cp"}});
  EXPECT_EQ(k.get("bug"), "topleft-cp");
  EXPECT_EQ(k.text(), "inputs=host,bug=topleft-cp");
}

TEST(Knobs, OpenModeKeepsForeignKnobsUnderTheGrammarAndNamingRule) {
  EXPECT_EQ(error_of("fail=nan,bug=topleft-cp", true), "");
  EXPECT_NE(error_of("Fail=nan", true).find("unknown knob 'Fail'"), std::string::npos);
  EXPECT_NE(error_of("fail-mode=nan", true).find("unknown knob 'fail-mode'"), std::string::npos);
  EXPECT_NE(error_of("fail=", true).find("knob fail: empty value"), std::string::npos);
  EXPECT_NE(error_of("bug=topleft", true).find("knob bug"), std::string::npos);  // declared knobs stay checked
  EXPECT_TRUE(is_knob_name("scratch_gib"));
  EXPECT_TRUE(is_knob_name("ragged_stats"));
  EXPECT_FALSE(is_knob_name("derived-offsets"));
  EXPECT_FALSE(is_knob_name("Guard"));
  EXPECT_FALSE(is_knob_name("1x"));
}

// Random valid knob lists (recorded seed) parse, and their canonical text parses to the same values.
TEST(Knobs, RandomValidListsRoundTrip) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("seed={}", seed));
  std::mt19937 rng(seed);
  for (int t = 0; t < 200; ++t) {
    std::vector<std::string> items;
    for (const auto& s : kSpecs) {
      if (rng() % 2) continue;
      std::string v;
      if (s.range) {
        const double x = s.range->lo + 1 + double(rng() % uint32_t(std::min(s.range->hi - s.range->lo, 1e6)));
        v = s.range->integer ? fmt::format("{}", int64_t(x)) : fmt::format("{}", x / 2 > 0 ? x / 2 : 1);
      } else {
        v = s.values[rng() % s.values.size()];
      }
      items.push_back(s.name + "=" + v);
    }
    std::shuffle(items.begin(), items.end(), rng);
    std::string text;
    for (const auto& i : items) text += (text.empty() ? "" : ",") + i;
    const Knobs k = parse_knobs("demo", text, kSpecs);
    EXPECT_EQ(k.text(), text);
    const Knobs again = parse_knobs("demo", k.text(), kSpecs);
    for (const auto& s : kSpecs) EXPECT_EQ(again.get(s.name), k.get(s.name)) << text;
  }
}

}  // namespace

// A bad knob, backend name or environment value is bad input but not a case error: the callers that try
// cases and drop the rejected ones (the shrinkers) catch CaseError alone, so they never swallow it.
TEST(Knobs, BadBackendInputIsNotACaseError) {
  const auto is_case_error = [](auto&& f) {
    try {
      f();
    } catch (const CaseError&) {
      return true;
    } catch (const BadInput&) {
      return false;
    }
    ADD_FAILURE() << "accepted";
    return false;
  };
  EXPECT_FALSE(is_case_error([] { parse_knobs("cpu-ref", "x=1", {}); }));
  EXPECT_FALSE(is_case_error([] { make_backend("no-such-backend"); }));
  EXPECT_TRUE(is_case_error([] { parse_case("op=indexer topk=0"); }));
}

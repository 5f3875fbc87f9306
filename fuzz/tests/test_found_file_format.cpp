// The found-file module reads back what it writes: the case, its choice sequence, the signature, the
// nondeterministic mark and every header comment, for generated cases from recorded seeds; foreign
// text in the comment lines (a hostile backend spec, failure reasons) comes back as it was written and
// never adds a claim, a choice sequence or a case line. A failing run keeps the layout its signature
// is read from.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include <fmt/format.h>

#include "attn_oracle/fuzz/campaign.h"
#include "attn_oracle/fuzz/case_file.h"
#include "attn_oracle/internal/atomic_file.h"
#include "attn_oracle/internal/utf8.h"
#include "temp_files.h"

using namespace ao;
using test::fresh_dir;
using test::slurp;
namespace fs = std::filesystem;

namespace {

Verdict failing(const std::string& reason, std::initializer_list<const char*> metrics) {
  Verdict v;
  v.kind = Verdict::Fail;
  v.reason = reason;
  for (const char* n : metrics) {
    Metric m;
    m.name = n;
    m.value = 1;
    m.rule = "== 0";
    m.failed = true;
    v.metrics.push_back(m);
  }
  return v;
}

FoundCase found(const GeneratedCase& g, uint64_t index, const std::string& backend, const Verdict& v) {
  FoundCase f;
  f.index = index;
  f.original = g.c;
  f.shrunk = g.c;
  f.choices = g.choices;
  f.original_result.verdict = v;
  f.shrunk_result.verdict = v;
  f.steps = int(index % 5);
  f.runs = int(index % 7);
  f.repro_runs = 3;
  f.repro_fails = index % 4 == 0 ? 2 : 3;  // every fourth one nondeterministic
  f.shrunk_repro_runs = index % 4 == 0 ? 0 : 3;
  f.shrunk_repro_fails = f.shrunk_repro_runs;
  f.signature = failure_signature(backend, make_layout(g.c), v);
  return f;
}

}  // namespace

TEST(FoundFileFormat, ReadsBackWhatItWritesOnRecordedSeeds) {
  const fs::path dir = fresh_dir("found-format");
  CampaignOptions o;
  o.backend = "cpu-bug:derived-offsets";
  o.seed = 3;
  o.shard = 1;
  o.shards = 2;
  const Verdict v = failing("out_of_causal 1 (allowed 0)", {"out_of_causal", "tie_aware_recall_min"});
  int checked = 0;
  for (uint64_t seed : {1u, 3u, 17u, 2024u}) {
    for (DimsProfile dims : {DimsProfile::Small, DimsProfile::Tiny}) {
      o.gen.dims = dims;
      for (uint64_t index = 0; index < 12; ++index) {
        const GeneratedCase g = generate_recorded(seed, index, o.gen);
        const FoundCase f = found(g, index, o.backend, v);
        const std::string path = found_file_path(dir.string(), f.shrunk);
        write_file_atomically(path, found_file_text(o, f));
        const std::optional<FoundFile> back = read_found_file(path);
        ASSERT_TRUE(back) << path << ":\n" << slurp(path);
        EXPECT_EQ(back->c, g.c) << print_case(g.c);
        ASSERT_TRUE(back->choices);
        EXPECT_EQ(back->choices->seq, g.choices);
        EXPECT_EQ(back->choices->gen.dims, dims);
        EXPECT_EQ(back->signature(), escape_comment_text(f.signature));
        EXPECT_EQ(unescape_comment_text(back->signature()), f.signature);
        EXPECT_EQ(back->nondeterministic(), f.nondeterministic());
        EXPECT_EQ(back->comments.count("not shrunk"), f.nondeterministic() ? 1u : 0u);
        EXPECT_EQ(unescape_comment_text(back->comments.at("original")), print_case(g.c));
        EXPECT_EQ(unescape_comment_text(back->comments.at("campaign")),
                  fmt::format("--seed 3 --shard 1/2 --dims {}, case #{}", dims_name(dims), index));
        EXPECT_EQ(unescape_comment_text(back->comments.at("backend")), "cpu-bug:derived-offsets   vs: cpu-ref");
        EXPECT_EQ(back->comments.at("original reproduced"), repro_note(f.repro_fails, f.repro_runs));
        EXPECT_EQ(back->comments.count("catches"), 0u);
        EXPECT_EQ(back->comments.count("choices"), 0u);
        // The gate reads it as one case with no claim.
        const auto entries = read_case_files({path});
        ASSERT_EQ(entries.size(), 1u);
        EXPECT_TRUE(entries[0].claim.empty());
        // The directory's index finds it by its signature.
        const auto sigs = found_signatures(dir.string());
        ASSERT_TRUE(sigs.count(back->signature()));
        fs::remove(path);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4 * 2 * 12);
  fs::remove_all(dir);
}

TEST(FoundFileFormat, HostileBackendTextComesBackOnItsOwnCommentLine) {
  const fs::path dir = fresh_dir("found-hostile");
  const std::string payload = "\n# catches: cpu-ref\nop=sdpa docs=16\n# choices: dims=small op=any 1 2\r\n"
                              "# signature: forged\\n \x85 \xe2\x80\xa8 \xc2\x85 \x7f \t \xff end";
  const std::vector<std::string> backends = {"exec:./run.sh" + payload, "plugin:/tmp/x.so" + payload,
                                             "no-such-backend:" + payload};
  for (const auto& be : backends) {
    CampaignOptions o;
    o.backend = be;
    o.vs = "exec:" + payload;
    const GeneratedCase g = generate_recorded(5, 0, o.gen);
    const FoundCase f = found(g, 0, be, failing("reason" + payload, {"max_abs_err"}));
    const std::string path = found_file_path(dir.string(), f.shrunk);
    write_file_atomically(path, found_file_text(o, f));
    const std::string text = slurp(path);
    const std::optional<FoundFile> back = read_found_file(path);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(back->c, g.c) << text;
    ASSERT_TRUE(back->choices) << text;
    EXPECT_EQ(back->choices->seq, g.choices) << text;
    EXPECT_EQ(unescape_comment_text(back->signature()), sanitize_utf8(f.signature)) << text;
    // The spec is written in its portable spelling (normalize_backend_spec may tidy it), the forged lines
    // inside it intact and on the backend's own line.
    const std::string backend_line = unescape_comment_text(back->comments.at("backend"));
    EXPECT_NE(backend_line.find("\n# catches: cpu-ref\nop=sdpa docs=16\n# choices: dims=small op=any 1 2\r\n"
                                "# signature: forged\\n"),
              std::string::npos)
        << text;
    EXPECT_NE(backend_line.find("   vs: exec:"), std::string::npos) << text;
    const auto entries = read_case_files({path});
    ASSERT_EQ(entries.size(), 1u) << text;
    EXPECT_TRUE(entries[0].claim.empty()) << text;
    EXPECT_EQ(entries[0].c, g.c) << text;
    // The forged signature inside the payload stays inside the backend's line.
    const auto sigs = found_signatures(dir.string());
    ASSERT_EQ(sigs.size(), 1u) << text;
    EXPECT_EQ(sigs.begin()->first, escape_comment_text(f.signature));
    fs::remove(path);
  }
  fs::remove_all(dir);
}

TEST(FoundFileFormat, UnescapeInvertsEscapeOnRandomBytes) {
  std::mt19937_64 rng(20261204);  // recorded seed
  const std::string alphabet = std::string("ab \\nx#:\n\r\t\x01\x1f\x7f\xc2\x85\x9f\xe2\x80\xa8\xa9\xff", 22);
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    const size_t n = rng() % 24;
    for (size_t k = 0; k < n; ++k) t += alphabet[rng() % alphabet.size()];
    const std::string e = escape_comment_text(t);
    EXPECT_EQ(e.find('\n'), std::string::npos);
    EXPECT_EQ(unescape_comment_text(e), sanitize_utf8(t)) << e;
  }
}

TEST(FoundFileFormat, AFailingRunKeepsTheLayoutItsSignatureIsReadFrom) {
  auto bug = make_backend("cpu-bug:derived-offsets");
  auto ref = make_backend("cpu-ref");
  const Case c = parse_case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13");
  const CaseResult r = run_case(c, *bug, *ref);
  ASSERT_EQ(r.verdict.kind, Verdict::Fail);
  ASSERT_TRUE(r.layout);
  EXPECT_EQ(r.layout->c, c);
  EXPECT_TRUE(r.layout->row_segment.empty());
  EXPECT_EQ(failure_signature("b", *r.layout, r.verdict), failure_signature("b", make_layout(c), r.verdict));
  EXPECT_NE(failure_signature("b", *r.layout, r.verdict).find("pad=yes"), std::string::npos);
  const CaseResult pass = run_case(parse_case("op=sdpa docs=16"), *ref, *ref);
  EXPECT_EQ(pass.verdict.kind, Verdict::Pass);
  EXPECT_FALSE(pass.layout);
}

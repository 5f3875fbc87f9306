// report.html: the pictures carry the failing case's data (not a fixed drawing), stay small for a
// 131k-token case, are well-formed, and render in headless Chromium without console errors, with the
// bug's colours on screen (skipped with a reason when chromium is not installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attn_oracle/pipeline/run_case.h"
#include "attn_oracle/report/report.h"
#include "temp_files.h"

using namespace ao;
using test::slurp;
namespace fs = std::filesystem;

namespace {

const char* const kSeedIndexer = "op=indexer docs=8192 cp=32 rank=31 heads=8 dim=64 topk=256 seed=7";
const char* const kTePadded = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13";

CaseResult run(const std::string& line, const std::string& backend, bool keep = true) {
  auto be = make_backend(backend);
  auto ref = make_backend("cpu-ref");
  return run_case(parse_case(line), *be, *ref, {}, keep);
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ao_report_html_" + std::to_string(getpid()) + "_" + name);
  fs::create_directories(d);
  return d;
}

std::string write(const fs::path& dir, const std::string& html) {
  const auto p = dir / "report.html";
  std::ofstream(p) << html;
  return p.string();
}

int sh(const std::string& cmd) { return std::system(cmd.c_str()); }

bool have(const std::string& prog) { return sh("command -v " + prog + " >/dev/null 2>&1") == 0; }

// The page is XHTML-compatible markup: any XML parser must accept it.
void expect_well_formed(const std::string& file) {
  if (!have("python3")) GTEST_SKIP() << "python3 not installed: cannot check well-formedness";
  EXPECT_EQ(sh("python3 -c \"import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])\" " + file), 0)
      << file << " is not well-formed";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(ReportHtml, ArtifactsOnlyForFailingCasesWhenAsked) {
  EXPECT_EQ(run(kTePadded, "cpu-ref").artifacts, nullptr);                       // passed: nothing kept
  EXPECT_EQ(run(kTePadded, "cpu-bug:derived-offsets", false).artifacts, nullptr);  // not asked
  const auto r = run(kTePadded, "cpu-bug:derived-offsets");
  ASSERT_NE(r.artifacts, nullptr);
  EXPECT_EQ(r.artifacts->layout.o_rows, 13);
  EXPECT_EQ(r.artifacts->got.o.size(), r.artifacts->ref.o.size());
  // Indexer: only the checked rows' top-k are kept (bounded memory for long sampled cases).
  const auto big = run("op=indexer docs=131072 cp=32 rank=31 heads=2 dim=16 topk=256 rows=256", "cpu-bug:topleft-cp");
  ASSERT_NE(big.artifacts, nullptr);
  EXPECT_EQ(big.artifacts->got.topk.size(), big.artifacts->layout.check_rows.size() * 256);
  EXPECT_LT(big.artifacts->layout.check_rows.size(), size_t(big.artifacts->layout.q_rows));
  EXPECT_TRUE(big.artifacts->got.scores.empty());
}

TEST(ReportHtml, SeedIndexerTopLeftIsAChunkLocalTriangle) {
  const auto bad = run(kSeedIndexer, "cpu-bug:topleft-cp");
  const auto good = run(kSeedIndexer, "cpu-ref");
  ASSERT_EQ(bad.verdict.kind, Verdict::Fail);
  const std::string html = report_html({good, bad});
  // Summary lists both cases; only the failing one gets a section with pictures.
  EXPECT_NE(html.find(std::string("<code>") + kSeedIndexer + "</code>"), std::string::npos);
  EXPECT_EQ(count(html, "<section class=\"case"), 1u);
  EXPECT_EQ(count(html, "<svg "), 2u);  // layout strip + selection map
  // The numbers behind the map: in both chunks (positions 3968+, 4096+) every backend pick of row i lies
  // in keys [0, i], i.e. its picks stop exactly q_causal_offset keys short of the causal limit.
  EXPECT_NE(html.find("-3968 (= −q_causal_offset)"), std::string::npos);
  EXPECT_NE(html.find("-4096 (= −q_causal_offset)"), std::string::npos);
  EXPECT_EQ(count(html, "128 of 128"), 2u);
  // The zoom panel opens on the chunk-local triangle: extra picks in keys [0, 128) plus margin.
  EXPECT_NE(html.find("zoom on extra picks: KV rows 0–192"), std::string::npos);
  // Layout strip: rank 31's chunks and their offsets.
  EXPECT_NE(html.find("chunk 31 · q_causal_offset 3968"), std::string::npos);
  EXPECT_NE(html.find("chunk 32 · q_causal_offset 4096"), std::string::npos);
  const auto dir = scratch("seed");
  expect_well_formed(write(dir, html));
  fs::remove_all(dir);
}

TEST(ReportHtml, ErrorMapMarksNaNUnwrittenAndClobberedRowsFromTheData) {
  const auto r = run(kTePadded, "cpu-bug:derived-offsets");
  ASSERT_EQ(r.verdict.kind, Verdict::Fail);
  const std::string html = report_html({r});
  // [a a a 1 b b 2 2 c c c c 3] read at prefix(lens) = 0,3,5: b and c are shifted left onto the
  // identifier slots; rows 3, 6, 7 (pad) are written, b/c rows read NaN poison, c's tail is never written.
  EXPECT_NE(html.find("buffer row 0: doc 0 (a) row 0: ok"), std::string::npos);
  EXPECT_NE(html.find("buffer row 3: pad slot: clobbered"), std::string::npos);
  EXPECT_NE(html.find("buffer row 4: doc 1 (b) row 0: NaN"), std::string::npos);
  EXPECT_NE(html.find("buffer row 6: pad slot: clobbered"), std::string::npos);
  EXPECT_NE(html.find("buffer row 11: doc 2 (c) row 3: unwritten"), std::string::npos);
  EXPECT_NE(html.find("buffer row 12: pad slot: pad"), std::string::npos);
  EXPECT_NE(html.find("prefix(lens) offsets"), std::string::npos);
  // A numeric-only defect on the same layout: errors marked, no NaN / clobbering invented.
  const auto obo = run(kTePadded, "cpu-bug:off-by-one-causal");
  ASSERT_EQ(obo.verdict.kind, Verdict::Fail);
  const std::string h2 = report_html({obo});
  EXPECT_EQ(h2.find(": NaN</title>"), std::string::npos);
  EXPECT_EQ(h2.find(": clobbered</title>"), std::string::npos);
  EXPECT_NE(h2.find(": err (max error"), std::string::npos);
  EXPECT_NE(h2.find("prefix(lens) offsets"), std::string::npos);  // a property of the layout, still drawn
  const auto dir = scratch("te");
  expect_well_formed(write(dir, html));
  fs::remove_all(dir);
}

TEST(ReportHtml, LongCaseStaysUnderTwoMegabytes) {
  const auto r = run("op=indexer docs=131072 cp=32 rank=31 heads=2 dim=16 topk=256 rows=256", "cpu-bug:topleft-cp");
  ASSERT_EQ(r.verdict.kind, Verdict::Fail);
  const std::string html = report_html({r});
  EXPECT_LT(html.size(), size_t(2) << 20);
  EXPECT_NE(html.find("keys per column"), std::string::npos);  // downsampled
  EXPECT_NE(html.find("-63488 (= −q_causal_offset)"), std::string::npos);
  const auto dir = scratch("long");
  expect_well_formed(write(dir, html));
  fs::remove_all(dir);
}

// pass=bwd: one map per gradient, drawn from the cells the comparator judged (Verdict::cell_maps), so
// a cell above 1 is a counted violation and the map's failing cells are the metric's.
TEST(ReportHtml, GradientMapsAreTheComparatorsCellsPerGradient) {
  const char* const line = "op=sdpa pass=bwd docs=40,30 q_pad=3,0 kv_pad=0,2 hq=4 hkv=2 dim=32 seed=5";
  const auto good = run(line, "cpu-ref");
  EXPECT_EQ(good.artifacts, nullptr);
  EXPECT_EQ(good.verdict.cell_maps, nullptr);  // not carried by a stored result
  const auto r = run(line, "cpu-bug:bwd-gqa-first-head");
  ASSERT_EQ(r.verdict.kind, Verdict::Fail);
  EXPECT_EQ(r.verdict.cell_maps, nullptr);  // moved into the artifacts
  ASSERT_NE(r.artifacts, nullptr);
  ASSERT_NE(r.artifacts->cell_maps, nullptr);
  ASSERT_EQ(r.artifacts->cell_maps->size(), 3u);
  for (const CellMap& m : *r.artifacts->cell_maps) {
    int64_t above = 0, pad = 0;
    for (size_t i = 0; i < m.state.size(); ++i) {
      above += m.state[i] == CellMap::Judged && m.ratio[i] > 1;
      pad += m.state[i] == CellMap::Pad;
    }
    const Metric* v = r.verdict.find(m.name + "_violations");
    ASSERT_NE(v, nullptr) << m.name;
    EXPECT_EQ(double(above), v->value) << m.name;
    EXPECT_EQ(pad, (m.kv_rows ? 2 : 3) * m.heads) << m.name;  // kv_pad=0,2 / q_pad=3,0
  }
  const std::string html = report_html({r});
  EXPECT_EQ(count(html, "<svg "), 2u);  // layout strip + gradient maps
  EXPECT_NE(html.find("<title>Q row 0: doc 0 (a) row 0: ok"), std::string::npos);
  EXPECT_NE(html.find("<title>Q row 40: pad slot: pad</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>K/V row 41: doc 1 (b) key 1: err (err/gate"), std::string::npos);
  EXPECT_NE(html.find("<title>K/V row 70: pad slot: pad</title>"), std::string::npos);
  EXPECT_EQ(html.find("<title>Q row 5: doc 0 (a) row 5: err"), std::string::npos);  // dQ is right under this model
  // Zeroed gradient pad rows: clobbered under grad_pad=untouched, and only there.
  const auto z = run(line, "cpu-bug:bwd-grad-pad-zeroed");
  ASSERT_EQ(z.verdict.kind, Verdict::Fail);
  const std::string hz = report_html({z});
  EXPECT_NE(hz.find("<title>Q row 40: pad slot: clobbered</title>"), std::string::npos);
  EXPECT_NE(hz.find("<title>K/V row 71: pad slot: clobbered</title>"), std::string::npos);
  EXPECT_EQ(hz.find(": err (err/gate"), std::string::npos);
  // The indexer's backward: dq and dw over Q rows, dk over K rows.
  const auto ix = run("op=indexer pass=bwd docs=60,40 heads=2 dim=16 topk=8 seed=4", "cpu-bug:dk-overwrite");
  ASSERT_EQ(ix.verdict.kind, Verdict::Fail);
  ASSERT_NE(ix.artifacts, nullptr);
  ASSERT_NE(ix.artifacts->cell_maps, nullptr);
  std::vector<std::string> names;
  for (const CellMap& m : *ix.artifacts->cell_maps) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dq", "dw", "dk"}));
  const std::string hi = report_html({ix});
  EXPECT_NE(hi.find("dk err/gate"), std::string::npos);
  EXPECT_NE(hi.find(": err (err/gate"), std::string::npos);
  const auto dir = scratch("grad");
  for (const std::string* page : {&html, &hz, &hi}) expect_well_formed(write(dir, *page));
  fs::remove_all(dir);
}

// Opened as a person would: headless Chromium loads the page and takes a screenshot.
TEST(ReportHtml, ChromiumRendersBothExamplesWithoutConsoleErrors) {
  std::string chromium;
  for (const char* c : {"chromium", "chromium-browser"})
    if (have(c)) { chromium = c; break; }
  if (chromium.empty())
    GTEST_SKIP() << "chromium not installed (scripts/tools/install-deps.sh --with-chromium installs Debian's chromium)";
  if (!have("python3")) GTEST_SKIP() << "python3 not installed: cannot decode the screenshot";
  struct Example {
    std::string name, line, backend;
    std::vector<std::pair<std::string, long>> colours;  // colour that must cover at least N pixels
  };
  const std::vector<Example> ex = {
      {"seed_topleft", kSeedIndexer, "cpu-bug:topleft-cp", {{"dc2626", 20000}, {"60a5fa", 20000}}},  // extra picks, misses
      {"te_derived", kTePadded, "cpu-bug:derived-offsets", {{"d946ef", 5000}, {"fb923c", 2000}, {"1f2937", 3000}}},
  };
  for (const auto& e : ex) {
    SCOPED_TRACE(e.name);
    const auto dir = scratch(e.name);
    const std::string html = write(dir, report_html({run(e.line, e.backend)}));
    const std::string png = (dir / "shot.png").string(), log = (dir / "chromium.log").string();
    const std::string cmd = "timeout 120 " + chromium +
                            " --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run"
                            " --disable-dev-shm-usage --hide-scrollbars --enable-logging=stderr --v=0"
                            " --user-data-dir=" + (dir / "profile").string() +
                            " --window-size=1280,1900 --screenshot=" + png + " file://" + html + " >" + log + " 2>&1";
    ASSERT_EQ(sh(cmd), 0) << slurp(log);
    const std::string out = slurp(log);
    EXPECT_EQ(out.find(":CONSOLE"), std::string::npos) << "console output while loading:\n" << out;
    EXPECT_EQ(out.find("Uncaught"), std::string::npos) << out;
    ASSERT_TRUE(fs::exists(png)) << out;
    std::string args;
    for (const auto& [c, n] : e.colours) args += " " + c;
    const std::string stats = (dir / "stats.json").string();
    ASSERT_EQ(sh("python3 " AO_SOURCE_DIR "/report/tests/png_stats.py " + png + args + " >" + stats), 0);
    const std::string js = slurp(stats);
    auto field = [&](const std::string& key) {
      const auto at = js.find("\"" + key + "\": ");
      return at == std::string::npos ? -1.0 : std::atof(js.c_str() + at + key.size() + 4);
    };
    EXPECT_EQ(field("width"), 1280) << js;
    EXPECT_GT(field("foreground_fraction"), 0.05) << "screenshot is (nearly) blank: " << js;
    EXPECT_GT(field("colours"), 50) << js;
    for (const auto& [c, n] : e.colours) EXPECT_GE(field(c), double(n)) << "too little #" << c << " on screen: " << js;
    fs::remove_all(dir);
  }
}

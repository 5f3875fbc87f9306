// The backend registry (backend.h) and the rule "a defect has one name everywhere": the cpu-bug model
// id is what the GPU `bug=` knobs, the plugin `bug=` knob, the Python adapters' `--bug` and every
// script, README line and corpus comment use. The source scan fails when one of them spells a defect
// another way (an id that is no cpu-bug model, or an old spelling such as `mask=topleft`).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/backend_spec.h"
#include "attn_oracle/backends/bug_models.h"
#include "cli_run.h"

using namespace ao;
using test::run_cli;
namespace fs = std::filesystem;

namespace {

std::set<std::string> defect_ids() {
  std::set<std::string> ids;
  for (const auto& m : bug_models()) ids.insert(m.name);
  return ids;
}

TEST(BackendRegistry, OneListEveryEntryChecked) {
  const auto ids = defect_ids();
  std::set<std::string> names;
  for (const auto& b : registered_backends()) {
    EXPECT_TRUE(names.insert(b.name).second) << b.name << " twice";
    for (const auto& k : b.knobs) {
      EXPECT_TRUE(is_knob_name(k.name)) << b.name << " knob " << k.name;
      EXPECT_FALSE(k.doc.empty()) << b.name << " knob " << k.name;
    }
    for (const auto& id : b.implemented_defects()) EXPECT_TRUE(ids.count(id)) << b.name << ": " << id;
  }
  for (const char* n : {"cpu-ref", "exec", "plugin"}) EXPECT_TRUE(names.count(n)) << n;
  for (const auto& id : ids) EXPECT_TRUE(names.count("cpu-bug:" + id)) << id;
}

TEST(BackendRegistry, DefectTableNamesEveryModelAndItsBackends) {
  const auto t = defect_table();
  ASSERT_EQ(t.size(), bug_models().size());
  for (const auto& [id, specs] : t) {
    ASSERT_FALSE(specs.empty()) << id;
    EXPECT_EQ(specs.front(), "cpu-bug:" + id);
    for (const auto& s : specs) EXPECT_NO_THROW(make_backend(s)) << s;  // every entry is a usable spec
  }
}

TEST(BackendRegistry, KnobsOnAKnoblessBackendAreBadInput) {
  for (const char* spec : {"cpu-ref:x=1", "cpu-bug:topleft-cp:bug=none", "cpu-ref:"}) {
    try {
      make_backend(spec);
      if (std::string(spec) != "cpu-ref:") ADD_FAILURE() << spec << " accepted";
    } catch (const BadInput& e) {
      EXPECT_EQ(e.key, "backend");
      EXPECT_EQ(e.value, spec);
      EXPECT_NE(std::string(e.what()).find("takes no knobs"), std::string::npos) << e.what();
    }
  }
}

TEST(BackendRegistry, CliListsKnobsAndDefects) {
  const auto list = run_cli("backends");
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.out.find("cpu-bug:topleft-cp"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("defects: topleft-cp"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("plugin:<path.so>[:<knobs>]"), std::string::npos) << list.out;
  const auto table = run_cli("backends --defects");
  EXPECT_EQ(table.code, 0);
  for (const auto& m : bug_models())
    EXPECT_NE(table.out.find(m.name + " "), std::string::npos) << m.name << "\n" << table.out;
  const auto bad = run_cli("repro op=indexer docs=64 --backend cpu-ref:colour=red");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("cpu-ref:colour=red"), std::string::npos) << bad.out;
}

// --- the source scan -------------------------------------------------------------------------------

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Files that name defects: the docs, scripts, Python adapters, plugins, GPU backends and their tests,
// corpora, the benchmark's scripts. Not results/ nor bench/results/ (recorded results keep the spelling of
// their day) nor this file.
std::vector<fs::path> scanned_files() {
  const fs::path root = AO_SOURCE_DIR;
  std::vector<fs::path> out;
  for (const char* f : {"README.md", "docs"}) {
    if (!fs::exists(root / f)) continue;
    if (fs::is_regular_file(root / f)) out.push_back(root / f);
  }
  const std::set<std::string> exts = {".md", ".sh", ".py", ".cpp", ".cu", ".h", ".case", ".txt"};
  for (const char* dir : {"docs", "scripts", "bench", "gpu_backends", "oracle", "app", "fuzz", "corpus"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || !exts.count(e.path().extension().string())) continue;
      if (e.path().filename() == "test_backend_registry.cpp" || e.path().filename() == "test_knobs.cpp") continue;  // old spellings on purpose
      if (e.path().string().find("/fuzz/corpus/") != std::string::npos) continue;  // libFuzzer byte inputs
      if (e.path().string().find("/bench/results/") != std::string::npos) continue;
      out.push_back(e.path());
    }
  }
  return out;
}

// Every spelled defect id in `text`, with where it was found.
struct Hit {
  std::string id, context;
};
std::vector<Hit> spelled_defects(const std::string& text) {
  std::vector<Hit> hits;
  static const std::regex forms[] = {
      std::regex(R"(cpu-bug:([a-z0-9][a-z0-9-]*))"),          // cpu-bug:<id>
      std::regex(R"(\bbug=([a-z0-9][a-z0-9-]*))"),            // GPU / plugin knob bug=<id>
      std::regex(R"(--bug[ =]+["']?([a-z0-9][a-z0-9-]*))"),   // Python adapters' --bug <id>
      std::regex(R"(AO_EXAMPLE_PLUGIN_BUG[=", ]+([a-z0-9][a-z0-9-]*))"),
  };
  for (const auto& re : forms)
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
      hits.push_back({(*it)[1].str(), (*it)[0].str()});
  // argparse: add_argument("--bug", ..., choices=[...])
  static const std::regex choices(R"re("--bug"[^)]*choices=\[([^\]]*)\])re");
  static const std::regex quoted(R"re("([^"]*)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), choices); it != std::sregex_iterator(); ++it) {
    const std::string list = (*it)[1].str();
    for (auto q = std::sregex_iterator(list.begin(), list.end(), quoted); q != std::sregex_iterator(); ++q)
      hits.push_back({(*q)[1].str(), "--bug choices " + list});
  }
  return hits;
}

// Old spellings of a defect that must not come back (the GPU backends keep them as aliases only).
const std::regex kOldSpellings(R"((cuda-indexer|plugin\S*):(\S*,)?mask=topleft|cuda-sdpa:(\S*,)?(derived-offsets|tail-read)=)");

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return d[b.size()];
}

// An unknown id that looks like another spelling of a known one (topleft / topleft-cp, derived_offsets,
// tailread), as opposed to a made-up name a test uses on purpose (cpu-bug:no-such-model, bug=nope).
bool respells_a_defect(const std::string& id) {
  auto bare = [](std::string s) {
    s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '-' || c == '_'; }), s.end());
    return s;
  };
  for (const auto& m : bug_models()) {
    const std::string& known = m.name;
    if (bare(id) == bare(known) || edit_distance(id, known) <= 2) return true;
    if (id.size() >= 3 && (known.find(id) != std::string::npos || id.find(known) != std::string::npos)) return true;
  }
  return false;
}

// A line that spells a defect another way on purpose (an alias declaration, a test that the old or a
// wrong spelling is read or refused) says so with the words "old spelling".
TEST(DefectNames, EverySpelledDefectIsACpuBugModelId) {
  auto ids = defect_ids();
  ids.insert("none");
  const auto files = scanned_files();
  ASSERT_GT(files.size(), 50u);
  int seen = 0;
  for (const auto& f : files) {
    // Tests (the hostile battery among them) use made-up backend names to check they are refused.
    const bool test_file =
        f.string().find("/tests/") != std::string::npos || f.filename().string().rfind("test_", 0) == 0;
    std::istringstream text(read(f));
    std::string line;
    for (int n = 1; std::getline(text, line); ++n) {
      if (line.find("old spelling") != std::string::npos) continue;
      for (const auto& h : spelled_defects(line)) {
        ++seen;
        if (test_file && !ids.count(h.id) && !respells_a_defect(h.id)) continue;  // a made-up name on purpose
        EXPECT_TRUE(ids.count(h.id)) << f << ":" << n << ": '" << h.context << "' names defect '" << h.id
                                     << "', which is no cpu-bug model id (attn-oracle backends --defects)";
      }
      std::smatch m;
      if (std::regex_search(line, m, kOldSpellings))
        ADD_FAILURE() << f << ":" << n << ": old defect spelling '" << m[0] << "' (use bug=<cpu-bug id>)";
    }
  }
  EXPECT_GT(seen, 20);  // the scan does find the spellings
}

TEST(DefectNames, TheScanCatchesADifferentSpelling) {
  EXPECT_TRUE(respells_a_defect("topleft"));
  EXPECT_TRUE(respells_a_defect("derived_offsets"));
  EXPECT_TRUE(respells_a_defect("tailread"));
  EXPECT_TRUE(respells_a_defect("gqa-stats-first"));
  EXPECT_FALSE(respells_a_defect("no-such-model"));
  EXPECT_FALSE(respells_a_defect("nope"));
  EXPECT_FALSE(respells_a_defect("x"));
  const auto ids = defect_ids();
  for (const char* text : {"--backend plugin:lib.so:bug=topleft", "numpy_ref.py --bug topleft",
                           "ap.add_argument(\"--bug\", default=\"none\", choices=[\"none\", \"topleft\"])",
                           "--backend cpu-bug:topleft"}) {
    const auto hits = spelled_defects(text);
    ASSERT_FALSE(hits.empty()) << text;
    bool unknown = false;
    for (const auto& h : hits) unknown |= !ids.count(h.id) && h.id != "none";
    EXPECT_TRUE(unknown) << text;
  }
  EXPECT_TRUE(std::regex_search(std::string("--backend cuda-indexer:inputs=host,mask=topleft"), kOldSpellings));
  EXPECT_TRUE(std::regex_search(std::string("cuda-sdpa:tail-read=1"), kOldSpellings));
  EXPECT_FALSE(std::regex_search(std::string("op=indexer mask=topleft --backend cuda-indexer"), kOldSpellings));
}

}  // namespace

// One spelling per backend (normalize_backend_spec): `# catches:` claims and failure signatures
// compare backends by it, so blanks, `.`/`..` in paths, a path's relative or absolute form and a knob
// at its default do not make another backend; Portable names temp paths and the checkout stably.
TEST(BackendSpec, SpellingsOfOneBackendHaveOneIdentity) {
  const auto id = [](const std::string& s) { return normalize_backend_spec(s, SpecForm::Identity); };
  EXPECT_EQ(id("exec:python3  x.py   --flag"), id("exec:python3 x.py --flag"));
  EXPECT_EQ(id("exec:/usr/bin/../bin/env true"), id("exec:/usr/bin/env true"));
  EXPECT_EQ(id("exec:/bin/sh tests/./lib.sh"), id("exec:/bin/sh tests/lib.sh"));
  EXPECT_EQ(id("exec:/bin/sh tests/lib.sh"), id("exec:/bin/sh " + (fs::current_path() / "tests/lib.sh").string()));
  EXPECT_NE(id("exec:/bin/sh x.sh\n"), id("exec:/bin/sh x.sh"));  // the appended directory becomes a command
  EXPECT_EQ(id("  cpu-ref "), "cpu-ref");
  EXPECT_EQ(id("plugin:tests/./lib.so:bug=none"), id("plugin:tests/lib.so"));
  EXPECT_EQ(id("plugin:lib.so:bug=topleft"), id("plugin:./lib.so:bug=topleft-cp"));  // the old spelling
  EXPECT_EQ(id("plugin:lib.so:z=1,bug=topleft-cp"), id("plugin:lib.so:bug=topleft-cp,z=1"));
  // Different backends stay different: quoted words are kept, another knob value, another program.
  EXPECT_NE(id("exec:python3 'a  b.py'"), id("exec:python3 'a b.py'"));
  EXPECT_NE(id("plugin:lib.so:bug=topleft-cp"), id("plugin:lib.so"));
  EXPECT_NE(id("exec:python3 x.py"), id("exec:python3 y.py"));
  EXPECT_NE(id("exec:a\nb"), id("exec:a b"));  // a newline separates two commands
  EXPECT_THROW(id("cpu-bug:no-such-model"), BadInput);
  EXPECT_THROW(id("plugin:lib.so:Bad=1"), BadInput);
}

TEST(BackendSpec, KnobIdentityDropsDefaultsAndSorts) {
  const std::vector<KnobSpec> specs = {knob_choice("bug", {"none", "x"}, ""), knob_number("n", {0, 10}, "1", ""),
                                       knob_choice("mode", {"a", "b"}, "")};
  EXPECT_EQ(parse_knobs("t", "mode=b,n=1.0,bug=none", specs).identity_text(), "mode=b");
  EXPECT_EQ(parse_knobs("t", "n=2.50,mode=a", specs).identity_text(), "n=2.5");
  EXPECT_EQ(parse_knobs("t", "bug=x,mode=b", specs).identity_text(), parse_knobs("t", "mode=b,bug=x", specs).identity_text());
}

TEST(BackendSpec, PortableSpellingIsRelativeToTheWorkingDirAndHidesTempPaths) {
  const auto portable = [](const std::string& s) { return normalize_backend_spec(s, SpecForm::Portable); };
  const std::string tmp = fs::temp_directory_path().string();
  const std::string cwd = fs::current_path().string();
  EXPECT_EQ(portable("exec:python3 " + cwd + "/scripts/adapters/ao_client.py --socket " + tmp +
                     "/tmp.XJCRoYhWuN/fa4.sock fa4_varlen"),
            "exec:python3 scripts/adapters/ao_client.py --socket <tmp>/fa4.sock fa4_varlen");
  EXPECT_EQ(portable("exec:python3 x.py --socket=" + tmp + "/tmp.A1/s.sock"), "exec:python3 x.py --socket=<tmp>/s.sock");
  EXPECT_EQ(portable("exec:python3 " + tmp + "/tmp.A1/s.py"), portable("exec:python3 " + tmp + "/tmp.B2/s.py"));
  EXPECT_EQ(portable("exec:/usr/bin/../bin/python3  a//b.py"), "exec:/usr/bin/python3 a/b.py");
  EXPECT_EQ(portable("plugin:" + cwd + "/sub/./lib.so:bug=none"), "plugin:sub/lib.so");
  EXPECT_EQ(portable("cpu-bug:topleft-cp"), "cpu-bug:topleft-cp");
}

TEST(BackendSpec, PortablePathsInFreeText) {
  const std::string tmp = fs::temp_directory_path().string();
  const std::string cwd = fs::current_path().string();
  EXPECT_EQ(portable_paths_in_text("ao-exec: 2: " + tmp + "/ao-exec-7QNTBz: Permission denied\nat " + cwd +
                                   "/scripts/x.py line 3, socket " + tmp + "/tmp.A1/s.sock"),
            "ao-exec: 2: <tmp>: Permission denied\nat scripts/x.py line 3, socket <tmp>/s.sock");
  EXPECT_EQ(portable_paths_in_text("no paths here"), "no paths here");
}

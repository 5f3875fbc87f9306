// report.html: one self-contained page (inline CSS and SVG, no script, no network): a summary table
// of every case, then per failing case its line, backend, versions, verdict, metrics and pictures
// (svg_pictures.h). The markup is also well-formed XML, so it can be checked by any XML parser.
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "attn_oracle/report/report.h"
#include "attn_oracle/verdict/verdict.h"
#include "svg.h"
#include "svg_pictures.h"

namespace ao {

namespace {


constexpr size_t kPictureBudget = size_t(6) << 20;  // stop drawing pictures once the page is this big

const char* const kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:20px 28px;color:#111827;background:#ffffff;max-width:1240px}
h1{font-size:22px;margin:0 0 6px}
h2{font-size:18px;margin:0 0 8px}
h3{font-size:14px;margin:18px 0 6px;color:#374151}
code,pre{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
pre.line{background:#f3f4f6;border:1px solid #d1d5db;border-radius:4px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;word-break:break-all;font-size:14px}
table{border-collapse:collapse;font-size:12.5px}
th,td{border:1px solid #d1d5db;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f4f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#fee2e2;font-weight:600}
td.bad{background:#fee2e2;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:700;font-size:12px;color:#ffffff}
.badge.pass{background:#16a34a}.badge.fail{background:#dc2626}.badge.error{background:#7c3aed}.badge.skipped{background:#6b7280}.badge.weak{background:#d97706}
section.case{border-top:3px solid #dc2626;margin-top:26px;padding-top:12px}
section.case.error{border-top-color:#7c3aed}
p.meta{margin:4px 0;font-size:13px;color:#374151}
p.note{font-size:12px;color:#4b5563;margin:4px 0}
p.sum{font-size:14px}
.cols{display:flex;gap:18px;flex-wrap:wrap;align-items:flex-start}
svg.pic{display:block;margin:4px 0 2px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
svg .bl{font-size:12px;font-weight:600;fill:#111827}
svg .bs{font-size:10.5px;fill:#4b5563}
svg .tk{font-size:10px;fill:#374151}
svg .cl{font-size:11px;font-weight:700;fill:#ffffff}
svg .cp{font-size:11px;font-weight:700;fill:#374151}
svg .cw{font-size:11px;font-weight:600;fill:#ffffff}
svg .hl{font-size:11px;font-weight:700;fill:#1d4ed8}
svg .tg{font-size:9.5px;fill:#374151}
svg .tb{font-size:9.5px;font-weight:700;fill:#111827}
svg .lg{font-size:11px;fill:#1f2937}
svg .pt{font-size:12px;font-weight:600;fill:#111827}
svg .ax{font-size:11px;fill:#374151;font-style:italic}
table.reach{margin-top:6px}
tr.best td{background:#dcfce7;font-weight:600}
)";

std::string badge(Verdict::Kind k) {
  return fmt::format("<span class=\"badge {0}\">{1}</span>", verdict_name(k), verdict_label(k));
}

std::string fmt_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}

std::string metrics_table(const Verdict& v) {
  std::string s = "<table class=\"metrics\"><tr><th>metric</th><th>value</th><th>gate</th></tr>";
  for (const auto& m : v.metrics)
    s += fmt::format("<tr{}><td>{}</td><td class=\"num\">{}</td><td>{}{}</td></tr>", m.failed ? " class=\"failed\"" : "",
                     xml_escape(m.name), fmt_value(m.value), xml_escape(m.rule), m.failed ? " — FAILED" : "");
  return s + "</table>";
}

std::string worst_table(const Verdict& v) {
  if (v.worst_rows.empty()) return {};
  std::string s = "<table class=\"worst\"><tr><th>worst Q row</th><th>doc</th><th>chunk</th><th>position</th><th>value</th></tr>";
  for (const auto& w : v.worst_rows)
    s += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                     "<td class=\"num\">{}</td></tr>",
                     w.row, w.doc, w.chunk, w.pos, fmt_value(w.value));
  return s + "</table>";
}

// Which known defect reproduces the failure (explain.h): the headline and the top of the ranking.
std::string explanation_block(const Explanation& e) {
  std::string s = fmt::format("<p class=\"meta explain\"><b>explain:</b> {}</p>", xml_escape(e.headline()));
  if (e.outcome == Explanation::NothingToExplain) return s;
  s += fmt::format("<p class=\"note\">{}</p>", xml_escape(e.match_rule));
  s += "<table class=\"explain\"><tr><th>bug model</th><th>wrong rows reproduced</th><th>rows broken</th>"
       "<th>clobbered pad slots reproduced</th><th>pad slots broken</th></tr>";
  for (size_t i = 0; i < e.ranked.size() && i < 5; ++i) {
    const auto& m = e.ranked[i];
    if (i > 0 && m.reproduced + m.pad_reproduced == 0) break;
    s += fmt::format("<tr{}><td>{}</td><td class=\"num\">{}/{}</td><td class=\"num\">{}</td><td class=\"num\">{}/{}</td>"
                     "<td class=\"num\">{}</td></tr>",
                     i < e.n_best ? " class=\"best\"" : "", xml_escape(m.label()), m.reproduced, e.wrong_rows, m.broken,
                     m.pad_reproduced, e.wrong_pad_slots, m.pad_broken);
  }
  return s + "</table>";
}

std::string case_section(const CaseResult& r, size_t i, bool pictures) {
  const bool err = r.verdict.kind == Verdict::Error;
  std::string s = fmt::format("<section class=\"case{}\" id=\"case-{}\">", err ? " error" : "", i + 1);
  s += fmt::format("<h2>{} case {} · <code>{}</code> vs <code>{}</code></h2>", badge(r.verdict.kind), i + 1, xml_escape(r.backend),
                   xml_escape(r.vs));
  s += fmt::format("<pre class=\"line\">{}</pre>", xml_escape(r.case_line));
  s += fmt::format("<p class=\"meta\">backend <code>{}</code>{} · reference <code>{}</code> · attn-oracle {} · "
                   "time: backend {:.3f} s, {}</p>",
                   xml_escape(r.backend), r.backend_version.empty() ? "" : " (" + xml_escape(r.backend_version) + ")", xml_escape(r.vs),
                   xml_escape(tool_version()), r.backend_seconds,
                   reference_not_run_note(r).empty() ? fmt::format("reference {:.3f} s", r.ref_seconds)
                                                     : reference_not_run_note(r));
  s += fmt::format("<p class=\"meta\"><b>verdict: {}</b>{}</p>", verdict_name(r.verdict.kind),
                   r.verdict.reason.empty() ? "" : " — " + xml_escape(r.verdict.reason));
  if (!r.verdict.metrics.empty()) s += "<div class=\"cols\">" + metrics_table(r.verdict) + worst_table(r.verdict) + "</div>";
  if (r.explanation) s += explanation_block(*r.explanation);
  if (!r.artifacts) {
    if (!err)
      s += "<p class=\"note\">No pictures: the outputs of this case were not kept (run_case without keep_artifacts, "
           "or the process's 1 GiB artifact budget was spent).</p>";
  } else if (!pictures) {
    s += "<p class=\"note\">Pictures omitted: the report reached its size budget; re-run this case alone with "
         "<code>attn-oracle repro … --report-dir</code>.</p>";
  } else {
    const auto& a = *r.artifacts;
    const std::string id = fmt::format("c{}", i + 1);
    s += "<h3>Layout strip: where every row of each buffer belongs</h3>" + svg_layout_strip(a.layout, id + "l");
    if (a.layout.c.pass == Pass::Bwd) {
      s += "<h3>Gradient error maps: per row and head, each gradient's error over its gate</h3>";
      s += "<p class=\"note\">x: the gradient's buffer rows (Q rows for dQ and dW, K/V rows for dK and dV), under the buffer's "
           "layout; y: heads. Colour: max|B−R| / gate of the cell, as the comparator judged it (above 1 fails).</p>";
      s += svg_gradient_maps(a, id + "g");
    } else if (a.layout.c.op == Op::Indexer) {
      s += "<h3>Selection map: which keys each query row picked</h3>";
      s += "<p class=\"note\">y: this rank's Q rows (chunks labelled with their positions); x: KV buffer rows. Shaded: the keys a "
           "row may pick (its causal prefix in its own document). Dark blue: picked by both; light blue: the reference "
           "picked it, the backend did not; red: the backend picked it, the reference did not.</p>";
      s += svg_selection_map(a, id + "s");
    } else {
      s += "<h3>Error map: per O row and head, how far the backend is from the reference</h3>";
      s += "<p class=\"note\">x: O / stats buffer rows, under the O buffer's layout (bound offsets, and where a kernel that derives "
           "offsets from the lengths would put each sequence); y: query heads. Colour: relative error "
           "max|B−R| / max(max|R|, atol) of O, absolute error of LSE.</p>";
      s += svg_error_map(a, id + "e");
    }
  }
  return s + "</section>\n";
}

}  // namespace

std::string report_html(const std::vector<CaseResult>& results) {
  const VerdictTally n = tally(results);
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>attn-oracle report</title>";
  s += fmt::format("<style>{}</style></head><body>\n", kStyle);
  s += "<h1>attn-oracle report</h1>";
  s += fmt::format("<p class=\"sum\"><b>{} passed, {} failed, {} weak, {} errors, {} skipped</b> ({} cases) · attn-oracle {}</p>\n",
                   n[Verdict::Pass], n[Verdict::Fail], n.weak(), n[Verdict::Error], n[Verdict::Skipped], results.size(),
                   xml_escape(tool_version()));
  s += "<table class=\"cases\"><tr><th>#</th><th>verdict</th><th>backend</th><th>vs</th><th>case</th>"
       "<th>failing metrics / reason</th></tr>";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const bool detail = r.verdict.kind == Verdict::Fail || r.verdict.kind == Verdict::Error;
    s += fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td>"
                     "<td><code>{}</code></td><td>{}</td></tr>",
                     detail ? fmt::format("<a href=\"#case-{0}\">{0}</a>", i + 1) : fmt::format("{}", i + 1),
                     badge(r.verdict.kind), xml_escape(r.backend), xml_escape(r.vs), xml_escape(r.case_line), xml_escape(r.verdict.reason));
  }
  s += "</table>\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.verdict.kind != Verdict::Fail && r.verdict.kind != Verdict::Error) continue;
    s += case_section(r, i, s.size() < kPictureBudget);
  }
  s += "</body></html>\n";
  return s;
}

}  // namespace ao

// Spellings of backend specs (backend.h: normalize_backend_spec): paths and shell command lines.
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "attn_oracle/backends/backend.h"
#include "attn_oracle/backends/backend_spec.h"

namespace ao {

namespace fs = std::filesystem;

namespace {

// `p` lies at or below `root` (both absolute and lexically normal).
bool under(const fs::path& p, const fs::path& root) {
  const fs::path rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

fs::path temp_root() {
  const char* t = std::getenv("TMPDIR");
  return fs::path(t && *t == '/' ? t : "/tmp").lexically_normal();
}

// A word the shell takes as written: no quoting, expansion or globbing characters.
bool plain_word(const std::string& w) {
  for (char c : w)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          std::string("_./+,:@%=-").find(c) != std::string::npos))
      return false;
  return true;
}

std::string normalize_word(const std::string& w, SpecForm form) {
  if (!plain_word(w) || w.find('/') == std::string::npos || w.find("://") != std::string::npos) return w;
  // `--socket=/tmp/x.sock`: the path is the value
  const auto eq = w.find('='), slash = w.find('/');
  if (eq != std::string::npos && eq < slash) return w.substr(0, eq + 1) + normalize_spec_path(w.substr(eq + 1), form);
  return normalize_spec_path(w, form);
}

}  // namespace

std::string normalize_spec_path(const std::string& path, SpecForm form) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  fs::path abs = fs::path(path).is_absolute() ? fs::path(path) : cwd / path;
  if (form == SpecForm::Identity) {
    const fs::path c = fs::weakly_canonical(abs, ec);
    return (ec ? abs.lexically_normal() : c).string();
  }
  abs = abs.lexically_normal();
  // The working directory first: a script beside the corpus stays re-runnable even when the working
  // directory itself lies in the temp directory. Both the given and the resolved spelling of it count.
  for (const fs::path& root : {cwd.lexically_normal(), fs::weakly_canonical(cwd, ec)})
    if (!root.empty() && under(abs, root)) return abs.lexically_relative(root).string();
  const fs::path tmp = temp_root();
  for (const fs::path& root : {tmp, fs::weakly_canonical(tmp, ec)})
    if (!root.empty() && under(abs, root)) return "<tmp>/" + abs.filename().string();
  return fs::path(path).is_absolute() ? abs.string() : fs::path(path).lexically_normal().string();
}

std::string portable_paths_in_text(const std::string& text) {
  std::error_code ec;
  std::string out = text;
  auto replace_all = [&](const std::string& from, auto&& with) {
    if (from.size() < 3) return;  // "/" (a working dir of /) is no directory to hide
    std::string res;
    size_t at = 0;
    for (size_t hit; (hit = out.find(from, at)) != std::string::npos;) {
      res += out.substr(at, hit - at);
      at = with(hit + from.size(), res);
    }
    out = res + out.substr(at);
  };
  const fs::path cwd = fs::current_path(ec);
  for (const fs::path& root : {cwd.lexically_normal(), fs::weakly_canonical(cwd, ec)})
    replace_all(root.string() + "/", [](size_t end, std::string&) { return end; });
  const fs::path tmp = temp_root();
  for (const fs::path& root : {tmp, fs::weakly_canonical(tmp, ec)})
    replace_all(root.string() + "/", [&](size_t end, std::string& res) {
      res += "<tmp>";
      size_t e = end;
      while (e < out.size() && out[e] != '/' && !std::isspace(static_cast<unsigned char>(out[e])) &&
             std::string(":'\"`;,)").find(out[e]) == std::string::npos)
        ++e;
      return e;
    });
  return out;
}

std::string normalize_shell_command(const std::string& command, SpecForm form) {
  std::string out, word, sep;
  bool quoted_word = false;
  char quote = 0;
  auto flush_word = [&] {
    if (word.empty()) return;
    if (!out.empty()) out += sep.find('\n') != std::string::npos ? "\n" : " ";  // a newline separates commands
    out += quoted_word ? word : normalize_word(word, form);
    word.clear();
    sep.clear();
    quoted_word = false;
  };
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote == 0 && (c == ' ' || c == '\t' || c == '\n')) {
      flush_word();
      sep += c;
      continue;
    }
    word += c;
    if (quote == '\'') {
      if (c == '\'') quote = 0;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      quoted_word = true;
    } else if (quote == '"') {
      if (c == '"') quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      quoted_word = true;
    }
  }
  flush_word();
  if (!out.empty() && sep.find('\n') != std::string::npos) out += "\n";  // `"$@"` is appended after it
  return out;
}

}  // namespace ao

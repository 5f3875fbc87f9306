#include "attn_oracle/fuzz/case_file.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "attn_oracle/internal/utf8.h"

namespace ao {

namespace fs = std::filesystem;

std::string case_text_of_line(const std::string& line) {
  std::string s = line.substr(0, line.find('#'));
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool read_bounded_line(std::istream& in, std::string& line, const std::string& file, int n, size_t max) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  for (;;) {
    const int ch = sb->sbumpc();
    if (ch == std::char_traits<char>::eof()) {
      if (line.empty()) {
        in.setstate(std::ios::eofbit);
        return false;
      }
      return true;
    }
    if (ch == '\n') return true;
    if (line.size() >= max)
      throw CaseFileError(fmt::format("{}:{}: line longer than {} bytes (the limit of a case file line); not read further",
                                      file, n, max));
    line += char(ch);
  }
}

std::string escape_comment_text(std::string_view raw) {
  const std::string text = sanitize_utf8(raw);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else if (c == 0xc2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80)
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));  // C1 controls, NEL among them
    else if (c == 0xe2 && i + 2 < text.size() && text[i + 1] == '\x80' && (text[i + 2] == '\xa8' || text[i + 2] == '\xa9'))
      out += text[(i += 2)] == '\xa8' ? "\\u2028" : "\\u2029";
    else out += char(c);
  }
  return out;
}

namespace {
int hex_value(std::string_view s) {
  int v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void append_utf8(std::string& out, int cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}
}  // namespace

std::string unescape_comment_text(std::string_view e) {
  std::string out;
  out.reserve(e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] != '\\' || i + 1 == e.size()) {
      out += e[i];
      continue;
    }
    const char k = e[i + 1];
    const size_t digits = k == 'x' ? 2 : k == 'u' ? 4 : 0;
    if (k == '\\' || k == 'n' || k == 'r' || k == 't') {
      out += k == '\\' ? '\\' : k == 'n' ? '\n' : k == 'r' ? '\r' : '\t';
      ++i;
    } else if (digits > 0 && i + 2 + digits <= e.size() && hex_value(e.substr(i + 2, digits)) >= 0) {
      const int v = hex_value(e.substr(i + 2, digits));
      if (k == 'x') out += char(v);
      else append_utf8(out, v);
      i += 1 + digits;
    } else {
      out += e[i];
    }
  }
  return out;
}

CaseFileWriter& CaseFileWriter::note(std::string_view text) {
  const std::string e = escape_comment_text(text);
  if (e.rfind("catches:", 0) == 0 || e.rfind("choices:", 0) == 0)  // would be read back as data
    throw std::logic_error("case file note '" + e + "' reads as a claim or a choice sequence");
  text_ += "# " + e + "\n";
  return *this;
}

CaseFileWriter& CaseFileWriter::comment(const std::string& tag, std::string_view text) {
  const bool word = !tag.empty() && std::all_of(tag.begin(), tag.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == ' '; });
  if (!word || tag == "catches" || tag == "choices")
    throw std::logic_error("case file comment tag '" + tag + "' is not a comment word");
  text_ += "# " + tag + ": " + escape_comment_text(text) + "\n";
  return *this;
}

CaseFileWriter& CaseFileWriter::choices(const RecordedChoices& r) {
  text_ += choices_comment(r) + "\n";
  return *this;
}

CaseFileWriter& CaseFileWriter::case_line(const Case& c) {
  text_ += print_case(c) + "\n";
  return *this;
}

std::string choices_comment(const RecordedChoices& r) {
  const char* op = !r.gen.op ? "any" : *r.gen.op == Op::Indexer ? "indexer" : "sdpa";
  // pass= only when filtered: the lines of campaigns without the filter stay as they were.
  const std::string pass = r.gen.pass ? fmt::format(" pass={}", pass_filter_name(r.gen.pass)) : "";
  return fmt::format("# choices: dims={} op={}{} {}", dims_name(r.gen.dims), op, pass, choices_text(r.seq));
}

std::optional<RecordedChoices> parse_choices_comment(const std::string& line) {
  static const std::string tag = "# choices:";
  if (line.rfind(tag, 0) != 0) return std::nullopt;
  std::istringstream is(line.substr(tag.size()));
  RecordedChoices r;
  std::string tok, rest;
  bool dims = false, op = false;
  while (is >> tok) {
    if (tok.rfind("dims=", 0) == 0) r.gen.dims = parse_dims(tok.substr(5)), dims = true;
    else if (tok.rfind("op=", 0) == 0) r.gen.op = parse_op_filter(tok.substr(3)), op = true;
    else if (tok.rfind("pass=", 0) == 0) r.gen.pass = parse_pass_filter(tok.substr(5));
    else rest += " " + tok;
  }
  if (!dims || !op) throw BadInput("choices", line, "needs dims=<small|glm|deepseek|tiny|wide> op=<indexer|sdpa|any>");
  r.seq = parse_choices(rest);
  return r;
}

namespace {
// A path whose type cannot be resolved is an error, not a skip: a symlink loop could hide a case file.
fs::file_status status_of(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // ENOENT: a dangling link, not a case file
    throw CaseFileError(fmt::format("{}: cannot resolve: {}", p.string(), ec.message()));
  return st;
}
}  // namespace

std::vector<std::string> collect_case_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const fs::file_status st = status_of(p);
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (fs::is_regular_file(status_of(it->path())) && it->path().extension() == ".case")
          found.push_back(it->path().string());
      if (ec) throw CaseFileError(fmt::format("{}: cannot read directory: {}", p, ec.message()));
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(st) || fs::is_fifo(st) || fs::is_character_file(st)) {
      out.push_back(p);  // a pipe (`gate <(echo LINE)`) or device is read once, like a file
    } else {
      throw CaseFileError(fmt::format("{}: no such case file or directory", p));
    }
  }
  return out;
}

namespace {

// A FIFO given as a case file (`gate <(echo LINE)`, a named pipe), read whole, at most `limit` bytes, with
// a bounded wait for its writer: a FIFO nobody writes (or a writer that stops writing) is an error after
// kPipeWaitSeconds, never a hang. Opened non-blocking, so the open itself cannot wait for a writer; a FIFO
// that never had one reports no event to poll (Linux), so the wait is the poll's.
constexpr int kPipeWaitSeconds = 10;

std::string read_fifo(const std::string& f, uint64_t limit) {
  const int fd = ::open(f.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw CaseFileError(fmt::format("{}: cannot open: {}", f, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(kPipeWaitSeconds);
  std::string text;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      throw CaseFileError(fmt::format("{}: a pipe that nothing was written to for {} s (no writer?): not read further",
                                      f, kPipeWaitSeconds));
    struct pollfd p {fd, POLLIN, 0};
    const int r = ::poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) throw CaseFileError(fmt::format("{}: cannot wait on the pipe: {}", f, std::strerror(errno)));
    if (r <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return text;  // every writer closed it
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      throw CaseFileError(fmt::format("{}: cannot read: {}", f, std::strerror(errno)));
    }
    text.append(buf, size_t(n));
    if (text.size() > limit)
      throw CaseFileError(fmt::format("{}: more than --max-mem ({} bytes) read from this corpus file", f, limit));
    deadline = Clock::now() + std::chrono::seconds(kPipeWaitSeconds);
  }
}

}  // namespace

std::vector<CaseEntry> read_case_files(const std::vector<std::string>& files, const LayoutLimits& lim) {
  std::vector<CaseEntry> out;
  for (const auto& f : files) {
    std::error_code ec;
    const uint64_t limit = uint64_t(std::max<int64_t>(lim.max_bytes, 0));
    const bool fifo = fs::is_fifo(fs::status(f, ec));
    std::ifstream file;
    std::istringstream piped;
    if (fifo) {
      piped.str(read_fifo(f, limit));
    } else {
      file.open(f, std::ios::binary);
      if (!file) throw CaseFileError(fmt::format("{}: cannot open", f));
    }
    std::istream& in = fifo ? static_cast<std::istream&>(piped) : file;
    if (fs::is_regular_file(f, ec) && fs::file_size(f, ec) > limit && !ec)
      throw CaseFileError(fmt::format("{}: {} bytes, more than --max-mem ({} bytes) allows a corpus file", f,
                                      fs::file_size(f, ec), limit));
    std::string line, claim;
    std::optional<RecordedChoices> choices;
    int n = 0, claim_line = 0, cases = 0;
    uint64_t bytes = 0;
    while (read_bounded_line(in, line, f, n + 1)) {
      ++n;
      if ((bytes += line.size() + 1) > limit)  // a pipe or device has no size to check first
        throw CaseFileError(fmt::format("{}:{}: more than --max-mem ({} bytes) read from this corpus file", f, n, limit));
      if (n == 1) line = strip_utf8_bom(line);
      if (line.rfind("# catches:", 0) == 0) {
        if (!claim.empty())
          throw CaseFileError(fmt::format("{}:{}: a second '# catches:' before a case line (line {} claims '{}')", f,
                                          n, claim_line, claim));
        claim = case_text_of_line(line.substr(10));
        claim_line = n;
        if (claim.empty()) throw CaseFileError(fmt::format("{}:{}: '# catches:' names no backend", f, n));
        continue;
      }
      try {
        if (auto rc = parse_choices_comment(line)) {
          choices = std::move(rc);
          continue;
        }
      } catch (const BadInput& err) {
        throw CaseFileError(fmt::format("{}:{}: {}", f, n, err.what()));
      }
      const std::string text = case_text_of_line(line);
      if (text.empty()) continue;
      try {
        CaseEntry e{f, n, parse_case(text), claim, claim_line, std::move(choices)};
        choices.reset();
        make_layout(e.c, lim, LayoutMode::Describe);  // validates without building per-row vectors
        out.push_back(std::move(e));
        ++cases;
        claim.clear();
      } catch (const CaseError& err) {
        throw CaseFileError(fmt::format("{}:{}: {}", f, n, err.what()));
      }
    }
    if (in.bad()) throw CaseFileError(fmt::format("{}: read error", f));
    if (!claim.empty())
      throw CaseFileError(fmt::format("{}:{}: '# catches: {}' is not followed by a case line", f, claim_line, claim));
    if (cases == 0)
      throw CaseFileError(fmt::format("{}: no case line (an empty or truncated corpus file is an error)", f));
  }
  return out;
}

}  // namespace ao

// .npy reader/writer (see npy.h). The header is a Python dict literal; this parser accepts exactly
// what numpy writes (any key order, optional trailing comma, 'L' suffixes of Python 2 files).
#include "attn_oracle/internal/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>

namespace ao::npy {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw NpyError(fmt::format("{}: {}", path, why));
}

// Minimal parser for numpy's header dict.
struct HeaderParser {
  const std::string& s;
  const std::string& path;
  size_t i = 0;

  void ws() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) { ++i; return true; }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(path, fmt::format("malformed header (expected '{}' at byte {}): {}", c, i, s));
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail(path, fmt::format("malformed header (expected a string at byte {}): {}", i, s));
    const char q = s[i++];
    const size_t b = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail(path, "malformed header (unterminated string): " + s);
    return s.substr(b, i++ - b);
  }
  std::string word() {
    ws();
    const size_t b = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(b, i - b);
  }
  int64_t integer() {
    ws();
    const size_t b = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (b == i) fail(path, fmt::format("malformed header (expected a dimension at byte {}): {}", b, s));
    if (i - b > 18) fail(path, "shape dimension too large: " + s.substr(b, i - b));
    const int64_t v = std::stoll(s.substr(b, i - b));
    if (i < s.size() && s[i] == 'L') ++i;
    return v;
  }
};

void parse_header(const std::string& h, const std::string& path, Array& a) {
  HeaderParser p{h, path};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      p.ws();
      if (p.i < h.size() && h[p.i] == '[') fail(path, "structured dtypes are not supported (descr is a list)");
      a.descr = p.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      const std::string w = p.word();
      if (w != "True" && w != "False") fail(path, "fortran_order is neither True nor False: '" + w + "'");
      fortran = w == "True";
      have_order = true;
    } else if (key == "shape") {
      p.expect('(');
      while (!p.eat(')')) {
        a.shape.push_back(p.integer());
        if (!p.eat(',')) { p.expect(')'); break; }
      }
      have_shape = true;
    } else {
      fail(path, "unexpected header key '" + key + "'");
    }
    if (!p.eat(',')) { p.expect('}'); break; }
  }
  if (!have_descr || !have_order || !have_shape)
    fail(path, fmt::format("header lacks '{}': {}", !have_descr ? "descr" : !have_order ? "fortran_order" : "shape", h));
  if (fortran && a.shape.size() > 1) fail(path, "Fortran-order arrays are not supported (write C order: np.ascontiguousarray)");
}

// Accepts '<' (and '|' or '=' for one-byte types, which numpy writes as '|').
std::string normalized(const std::string& d) {
  std::string r = d;  // (not "<" + d.substr(1): GCC 12 warns falsely, -Wrestrict)
  if (r.size() >= 2 && (r[0] == '|' || r[0] == '=')) r[0] = '<';
  return r;
}

}  // namespace

int64_t Array::elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

size_t item_size(const std::string& descr) {
  static const char* const known[] = {"<f2", "<f4", "<f8", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8", "<b1"};
  const std::string d = normalized(descr);
  if (!d.empty() && d[0] == '>') throw NpyError(fmt::format("big-endian dtype '{}' is not supported (write little-endian)", descr));
  for (const char* k : known)
    if (d == k) return size_t(std::stoul(d.substr(2)));
  throw NpyError(fmt::format("dtype '{}' is not supported", descr));
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

const char* file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISLNK(m) ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a plain file";
}

// A regular file, opened so that nothing blocks: lstat first (no link is followed), then
// O_NONBLOCK|O_NOFOLLOW (a FIFO swapped in meanwhile opens without waiting) and fstat again.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  explicit RegularFile(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) fail(path, fmt::format("{}, not a regular file (only regular files are read)", file_kind(st.st_mode)));
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
      fail(path, fmt::format("{}, not a regular file (only regular files are read)", file_kind(st.st_mode)));
    size = uint64_t(st.st_size);
  }
  ~RegularFile() { ::close(fd); }
  bool read_at(void* buf, uint64_t n, uint64_t off) const {
    char* p = static_cast<char*>(buf);
    while (n > 0) {
      const ssize_t r = ::pread(fd, p, size_t(std::min<uint64_t>(n, 1 << 30)), off_t(off));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r, off += uint64_t(r), n -= uint64_t(r);
    }
    return true;
  }
};

// The header (descr normalized, shape), where the data starts and how many bytes it has to hold.
// Nothing is allocated for the data here: a header may announce any shape.
struct Header {
  Array a;
  uint64_t data_at = 0, data_bytes = 0;
};

Header read_header(const std::string& path, const RegularFile& f) {
  const uint64_t file_size = f.size;
  char pre[12];
  if (file_size < 10 || !f.read_at(pre, 10, 0)) fail(path, fmt::format("truncated: {} bytes, shorter than the .npy preamble", file_size));
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) fail(path, "not a .npy file (bad magic)");
  const auto major = static_cast<unsigned char>(pre[6]), minor = static_cast<unsigned char>(pre[7]);
  Header h;
  uint64_t header_len = 0;
  if (major == 1) {
    header_len = uint64_t(static_cast<unsigned char>(pre[8])) | uint64_t(static_cast<unsigned char>(pre[9])) << 8;
    h.data_at = 10 + header_len;
  } else if (major == 2 || major == 3) {
    if (!f.read_at(pre + 10, 2, 10)) fail(path, "truncated in the header length");
    header_len = uint64_t(static_cast<unsigned char>(pre[8])) | uint64_t(static_cast<unsigned char>(pre[9])) << 8 |
                 uint64_t(static_cast<unsigned char>(pre[10])) << 16 | uint64_t(static_cast<unsigned char>(pre[11])) << 24;
    h.data_at = 12 + header_len;
  } else {
    fail(path, fmt::format("unsupported .npy format version {}.{}", major, minor));
  }
  if (h.data_at > file_size) fail(path, fmt::format("truncated in the header ({} bytes, header needs {})", file_size, h.data_at));
  std::string header(size_t(header_len), '\0');
  if (!f.read_at(header.data(), header_len, h.data_at - header_len)) fail(path, "cannot read the header");
  parse_header(header, path, h.a);
  size_t isz = 0;
  try {
    isz = item_size(h.a.descr);
  } catch (const NpyError& e) {
    fail(path, e.what());
  }
  h.a.descr = normalized(h.a.descr);
  uint64_t n = 1;
  for (auto d : h.a.shape) {
    if (d < 0) fail(path, "negative dimension in shape " + shape_str(h.a.shape));
    if (d > 0 && n > std::numeric_limits<uint64_t>::max() / 16 / uint64_t(d)) fail(path, "shape too large: " + shape_str(h.a.shape));
    n *= uint64_t(d);
  }
  h.data_bytes = n * isz;
  return h;
}

// The file size must be exactly header + data: checked before anything is allocated.
void check_size(const std::string& path, const RegularFile& f, const Header& h) {
  const uint64_t need = h.data_bytes, have = f.size - h.data_at;
  if (have < need)
    fail(path, fmt::format("truncated: shape {} of {} needs {} data bytes, the file has {}", shape_str(h.a.shape),
                           h.a.descr, need, have));
  if (have > need)
    fail(path, fmt::format("{} bytes of trailing data after shape {} of {}", have - need, shape_str(h.a.shape), h.a.descr));
}

}  // namespace

Array read(const std::string& path) {
  const RegularFile f(path);
  Header h = read_header(path, f);
  check_size(path, f, h);
  h.a.data.resize(size_t(h.data_bytes));
  if (h.data_bytes && !f.read_at(h.a.data.data(), h.data_bytes, h.data_at)) fail(path, "read error in the data section");
  return std::move(h.a);
}

void write(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data) {
  const size_t isz = item_size(descr);
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_str(shape));
  // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  const size_t total = (10 + h.size() + 1 + 63) / 64 * 64;
  if (total - 10 > 0xffff) throw NpyError(path + ": header too long for format 1.0");
  h.append(total - 10 - h.size() - 1, ' ');
  h += '\n';
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, "cannot create");
  f.write(kMagic, kMagicLen);
  const char ver[4] = {1, 0, char(h.size() & 0xff), char(h.size() >> 8)};
  f.write(ver, 4);
  f.write(h.data(), std::streamsize(h.size()));
  f.write(static_cast<const char*>(data), std::streamsize(size_t(n) * isz));
  if (!f.flush()) fail(path, "write error (disk full?)");
}

template <class T>
std::vector<T> read_as(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape) {
  if (item_size(descr) != sizeof(T)) throw std::logic_error("npy::read_as: element type does not match " + descr);
  // dtype and shape are checked against the expected ones before the data is allocated.
  const RegularFile f(path);
  const Header h = read_header(path, f);
  if (h.a.descr != normalized(descr)) fail(path, fmt::format("dtype {} expected, got {}", normalized(descr), h.a.descr));
  if (h.a.shape != shape) fail(path, fmt::format("shape {} expected, got {}", shape_str(shape), shape_str(h.a.shape)));
  check_size(path, f, h);
  std::vector<T> v(size_t(h.a.elements()));
  if (h.data_bytes && !f.read_at(v.data(), h.data_bytes, h.data_at)) fail(path, "read error in the data section");
  return v;
}

template std::vector<float> read_as<float>(const std::string&, const std::string&, const std::vector<int64_t>&);
template std::vector<int32_t> read_as<int32_t>(const std::string&, const std::string&, const std::vector<int64_t>&);
template std::vector<uint16_t> read_as<uint16_t>(const std::string&, const std::string&, const std::vector<int64_t>&);
template std::vector<double> read_as<double>(const std::string&, const std::string&, const std::vector<int64_t>&);
template std::vector<int64_t> read_as<int64_t>(const std::string&, const std::string&, const std::vector<int64_t>&);

}  // namespace ao::npy

// NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order, little-endian, for the exec:
// backend's file exchange. Reading checks everything a foreign writer can get wrong and says which:
// bad magic or header, unsupported version, big-endian or Fortran order, a shape or dtype other than
// expected, and a data section shorter (truncated) or longer than the shape says.
// Why not a library: Debian 12's only C++ .npy reader (xtensor's xnpy.hpp) reads the data section
// without checking that the read succeeded, so a truncated file silently loads garbage.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ao::npy {

// A malformed or unexpected file; what() names the file and the problem.
struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Array {
  std::string descr;           // numpy dtype string as stored, e.g. "<f4", "<i4", "<u2", "<f2", "|u1"
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<char> data;      // raw little-endian elements, C order
  int64_t elements() const;
};

// Item size of a descr ("<f4" -> 4); throws NpyError for descrs this module does not handle.
size_t item_size(const std::string& descr);
// "(13, 8, 64)" style, as numpy prints shapes.
std::string shape_str(const std::vector<int64_t>& shape);

Array read(const std::string& path);
// Writes a version 1.0 file (header padded to a multiple of 64 bytes, as numpy does).
void write(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data);

// Reads and checks descr and shape exactly; returns the elements. T must match descr's item size.
template <class T>
std::vector<T> read_as(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape);

}  // namespace ao::npy

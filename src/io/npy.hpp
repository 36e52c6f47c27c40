#pragma once
// A small .npy reader/writer: format versions 1.0, 2.0 and 3.0, dtypes <f4, <f2, <f8, <i4, <i8, <u2
// (bfloat16 bits, as NumPy stores them), C order.
// Every malformed or truncated file is a grape::input_error naming the file; the reader never
// reads past the bytes it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grape::io {

enum class npy_dtype { f32, f16, f64, i32, i64, u16 };

struct npy_array {
  npy_dtype dtype = npy_dtype::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;  // little-endian elements, C order

  std::int64_t size() const;  // number of elements
};

std::size_t dtype_size(npy_dtype t);
std::string_view dtype_descr(npy_dtype t);  // "<f4", ...

/// Parses the bytes of a .npy file; `file` names it in error messages.
npy_array parse_npy(std::string_view bytes, const std::string& file);
npy_array read_npy(const std::string& path);

/// The bytes of a version 1.0 file (2.0 if the header needs it).
std::string serialize_npy(const npy_array& a);
/// Writes `path` directly (callers wanting atomic replacement write a temp file and rename).
void write_npy(const std::string& path, const npy_array& a);

}  // namespace grape::io

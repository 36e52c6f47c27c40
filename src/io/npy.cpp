// .npy reading and writing (npy.hpp). The header is a Python dict literal; only the subset NumPy
// writes is accepted: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
#include "io/npy.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <optional>

#include "grape/detail/error.hpp"
#include "grape/detail/read_file.hpp"

namespace grape::io {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr std::string_view magic{"\x93NUMPY", 6};
constexpr std::int64_t max_dim = std::int64_t{1} << 40;

// A cursor over the header text; every access is bounds-checked.
class header_parser {
 public:
  header_parser(std::string_view text, const std::string& file) : t_(text), file_(file) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw input_error(fmt::format("{}: malformed .npy header: {}", file_, what));
  }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skip_ws();
    return i_ < t_.size() && t_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(fmt::format("expected '{}' at offset {}", c, i_));
    ++i_;
  }
  std::string quoted() {
    skip_ws();
    if (i_ >= t_.size() || (t_[i_] != '\'' && t_[i_] != '"')) fail(fmt::format("expected a string at offset {}", i_));
    const char q = t_[i_++];
    const auto end = t_.find(q, i_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s{t_.substr(i_, end - i_)};
    i_ = end + 1;
    return s;
  }
  bool word(std::string_view w) {
    skip_ws();
    if (t_.substr(i_, w.size()) == w) {
      i_ += w.size();
      return true;
    }
    return false;
  }
  std::int64_t integer() {
    skip_ws();
    const std::size_t start = i_;
    std::int64_t v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      v = v * 10 + (t_[i_] - '0');
      if (v > max_dim) fail("a dimension is too large");
      ++i_;
    }
    if (i_ == start) fail(fmt::format("expected an integer at offset {}", i_));
    if (i_ < t_.size() && t_[i_] == 'L') ++i_;  // Python 2 long suffix
    return v;
  }
  std::vector<std::int64_t> shape() {
    expect('(');
    std::vector<std::int64_t> s;
    while (!peek(')')) {
      if (s.size() >= 32) fail("too many dimensions");
      s.push_back(integer());
      if (peek(',')) ++i_;
      else if (!peek(')')) fail(fmt::format("expected ',' or ')' at offset {}", i_));
    }
    ++i_;
    return s;
  }

 private:
  std::string_view t_;
  const std::string& file_;
  std::size_t i_ = 0;
};

npy_dtype dtype_of(const std::string& descr, const std::string& file) {
  if (descr == "<f4") return npy_dtype::f32;
  if (descr == "<f2") return npy_dtype::f16;
  if (descr == "<f8") return npy_dtype::f64;
  if (descr == "<i4") return npy_dtype::i32;
  if (descr == "<i8") return npy_dtype::i64;
  if (descr == "<u2") return npy_dtype::u16;
  std::string shown;
  for (char c : descr.substr(0, 16)) shown += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  throw input_error(fmt::format("{}: unsupported .npy dtype '{}' (supported: <f4, <f2, <f8, <i4, <i8, <u2)",
                                file, shown));
}

std::uint32_t read_le(std::string_view b, std::size_t at, int n) {
  std::uint32_t v = 0;
  for (int k = 0; k < n; ++k) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + k])) << (8 * k);
  return v;
}

}  // namespace

std::size_t dtype_size(npy_dtype t) {
  switch (t) {
    case npy_dtype::f32: return 4;
    case npy_dtype::f16: return 2;
    case npy_dtype::f64: return 8;
    case npy_dtype::i32: return 4;
    case npy_dtype::i64: return 8;
    case npy_dtype::u16: return 2;
  }
  return 0;
}

std::string_view dtype_descr(npy_dtype t) {
  switch (t) {
    case npy_dtype::f32: return "<f4";
    case npy_dtype::f16: return "<f2";
    case npy_dtype::f64: return "<f8";
    case npy_dtype::i32: return "<i4";
    case npy_dtype::i64: return "<i8";
    case npy_dtype::u16: return "<u2";
  }
  return "?";
}

std::int64_t npy_array::size() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

npy_array parse_npy(std::string_view bytes, const std::string& file) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != magic)
    throw input_error(fmt::format("{}: not a .npy file (bad magic)", file));
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = read_le(bytes, 8, 2);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw input_error(fmt::format("{}: truncated .npy header", file));
    header_len = read_le(bytes, 8, 4);
    header_start = 12;
  } else {
    throw input_error(fmt::format("{}: unsupported .npy format version {}", file, major));
  }
  if (header_len > bytes.size() - header_start)
    throw input_error(fmt::format("{}: truncated .npy header ({} bytes announced, {} present)", file,
                                  header_len, bytes.size() - header_start));

  header_parser p(bytes.substr(header_start, header_len), file);
  std::string descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::int64_t>> shape;
  bool have_descr = false;
  p.expect('{');
  while (!p.peek('}')) {
    const std::string key = p.quoted();
    p.expect(':');
    if (key == "descr" && !have_descr) {
      descr = p.quoted();
      have_descr = true;
    } else if (key == "fortran_order" && !fortran) {
      if (p.word("True")) fortran = true;
      else if (p.word("False")) fortran = false;
      else p.fail("fortran_order must be True or False");
    } else if (key == "shape" && !shape) {
      shape = p.shape();
    } else {
      p.fail("unexpected or repeated key");
    }
    if (p.peek(',')) p.expect(',');
    else if (!p.peek('}')) p.fail("expected ',' or '}'");
  }
  if (!have_descr || !fortran || !shape) p.fail("needs the keys descr, fortran_order and shape");
  if (*fortran) throw input_error(fmt::format("{}: fortran_order True is not supported (C order only)", file));

  npy_array a;
  a.dtype = dtype_of(descr, file);
  a.shape = std::move(*shape);
  const std::size_t elem = dtype_size(a.dtype);
  const std::size_t available = bytes.size() - header_start - header_len;
  // Count elements while bounding the product by what the file could hold.
  std::size_t count = 1;
  bool empty = false;
  for (auto d : a.shape) empty = empty || d == 0;
  if (!empty)
    for (auto d : a.shape) {
      if (static_cast<std::size_t>(d) > available / elem / count)
        throw input_error(fmt::format("{}: truncated .npy data (shape needs more than the {} bytes present)",
                                      file, available));
      count *= static_cast<std::size_t>(d);
    }
  else
    count = 0;
  if (count * elem != available)
    throw input_error(fmt::format("{}: .npy data is {} bytes, the shape needs {}", file, available,
                                  count * elem));
  a.data.resize(available);
  if (available) std::memcpy(a.data.data(), bytes.data() + header_start + header_len, available);
  return a;
}

npy_array read_npy(const std::string& path) {
  return parse_npy(grape::detail::read_file(path), path);
}

std::string serialize_npy(const npy_array& a) {
  std::string dims;
  for (auto d : a.shape) dims += fmt::format("{}, ", d);
  if (a.shape.size() > 1) dims.resize(dims.size() - 2);
  else if (a.shape.size() == 1) dims.resize(dims.size() - 1);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", dtype_descr(a.dtype), dims);
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends with '\n'.
  const bool v2 = header.size() + 11 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out{magic};
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const std::uint32_t n = static_cast<std::uint32_t>(header.size());
  for (std::size_t k = 0; k < (v2 ? 4u : 2u); ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

void write_npy(const std::string& path, const npy_array& a) {
  const std::string bytes = serialize_npy(a);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw input_error(fmt::format("{}: cannot open for writing", path));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) throw input_error(fmt::format("{}: write failed", path));
}

}  // namespace grape::io

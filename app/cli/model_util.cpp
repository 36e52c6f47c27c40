// Shared by the model subcommands (model_util.hpp).
#include "cli/model_util.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "grape/detail/error.hpp"
#include "io/npy.hpp"

namespace grape::cli {

std::optional<model::model_description> builtin_model(const std::string& name) {
  if (name != "rope") return std::nullopt;
  model::model_description m;
  m.file = "rope";
  m.model_type = "builtin rope";
  m.kind = model::encoding_kind::rotary;
  m.num_heads = 1;
  m.num_kv_heads = 1;
  m.head_dim = 128;
  m.kv_formula = "not applicable (built-in encoding, no model)";
  m.rotary.head_dim = m.rotary.rotary_dim = 128;
  m.rotary.rotary_dim_from = "built-in";
  m.rotary.schedule.rotary_dim = 128;
  m.rotary.schedule.base = 10000.0;
  return m;
}

evaluated_model evaluate_model(const std::string& path, std::optional<std::int64_t> seq_len,
                               frequency_precision precision, bool allow_builtin) {
  evaluated_model e;
  e.label = path;
  std::optional<model::model_description> b;
  if (allow_builtin) b = builtin_model(path);
  e.desc = b ? *b : model::load_model_config(path);
  if (e.desc.kind != model::encoding_kind::rotary) return e;
  auto r = model::evaluate_rotary(e.desc, seq_len, precision);
  e.table = std::move(r.table);
  e.spec = std::move(r.spec);
  return e;
}

std::vector<std::int64_t> read_positions(const std::string& path, std::int64_t tokens) {
  const io::npy_array p = io::read_npy(path);
  if (p.shape.size() != 1 || p.shape[0] != tokens)
    throw input_error(fmt::format("{}: positions must have shape [{}] (one per token)", path, tokens));
  std::vector<std::int64_t> out(static_cast<std::size_t>(tokens));
  if (p.dtype == io::npy_dtype::i64) {
    std::copy_n(reinterpret_cast<const std::int64_t*>(p.data.data()), tokens, out.begin());
  } else if (p.dtype == io::npy_dtype::i32) {
    const auto* v = reinterpret_cast<const std::int32_t*>(p.data.data());
    std::copy_n(v, tokens, out.begin());
  } else {
    throw input_error(fmt::format("{}: positions must be int32 or int64 (got {})", path,
                                  io::dtype_descr(p.dtype)));
  }
  return out;
}

frequency_precision parse_precision(const std::string& s) {
  if (s == "float64") return frequency_precision::float64;
  if (s == "float32_reference") return frequency_precision::float32_reference;
  throw input_error(fmt::format("--precision: must be float64 or float32_reference (got {})", s));
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw input_error(fmt::format("{}: cannot create a temp file next to it: {}", path, std::strerror(errno)));
  ::fchmod(fd, 0644);  // mkstemp creates 0600; outputs are ordinary files
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      std::remove(tmp.c_str());
      throw input_error(fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw input_error(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
  }
}

}  // namespace grape::cli

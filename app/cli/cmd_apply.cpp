// grape apply --config C --input X.npy --positions P.npy --output Y.npy [--seq-len N]:
// rotates X [tokens, heads, head_dim] (float32 or float16; float64, NumPy's default, is rounded
// to float32) with the CPU kernel. Channels past rotary_dim pass through. The output is written to
// a temp file and renamed: no partial output.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>

#include "cli/command_registry.hpp"
#include "cli/model_util.hpp"
#include "cpu/rotate_qk.hpp"
#include "grape/detail/error.hpp"
#include "io/npy.hpp"

namespace grape::cli {

namespace {

struct apply_options {
  std::string config, input, positions, output;
  std::optional<std::int64_t> seq_len;
  std::string precision = "float32_reference";
};

// The kernel stores float32 or float16 and computes in float32: float64 input is rounded to float32
// and the output is float32 (float64 output would claim digits the kernel does not compute).
io::npy_array rounded_to_float32(const io::npy_array& x) {
  io::npy_array y;
  y.dtype = io::npy_dtype::f32;
  y.shape = x.shape;
  y.data.resize(static_cast<std::size_t>(x.size()) * sizeof(float));
  for (std::int64_t i = 0; i < x.size(); ++i) {
    double v;
    std::memcpy(&v, x.data.data() + i * sizeof(double), sizeof v);
    const auto f = static_cast<float>(v);
    std::memcpy(y.data.data() + i * sizeof(float), &f, sizeof f);
  }
  return y;
}

void run(const apply_options& o) {
  const frequency_precision precision = parse_precision(o.precision);
  const model::model_description m = model::load_model_config(o.config);
  if (m.kind != model::encoding_kind::rotary)
    throw input_error(fmt::format(
        "{}: {} model ({}): apply rotates q/k for rotary models only; this encoding is a score bias",
        o.config, to_string(m.kind), m.model_type.empty() ? "no model_type" : m.model_type));

  io::npy_array x = io::read_npy(o.input);
  const bool from_float64 = x.dtype == io::npy_dtype::f64;
  if (from_float64) x = rounded_to_float32(x);
  if (x.dtype != io::npy_dtype::f32 && x.dtype != io::npy_dtype::f16)
    throw input_error(fmt::format("{}: input must be float32, float16 or float64 (got {})", o.input,
                                  io::dtype_descr(x.dtype)));
  if (x.shape.size() != 3)
    throw input_error(fmt::format("{}: input must have shape [tokens, heads, head_dim] (got rank {})",
                                  o.input, x.shape.size()));
  if (x.shape[2] != m.rotary.head_dim)
    throw input_error(fmt::format("{}: head_dim {} does not match the config's {} ({})", o.input,
                                  x.shape[2], m.rotary.head_dim, o.config));
  const std::int64_t tokens = x.shape[0], heads = x.shape[1];
  const std::vector<std::int64_t> pos = read_positions(o.positions, tokens);

  // The reference's current length: the longest position seen, plus one.
  std::int64_t len = 0;
  for (auto p : pos) len = std::max(len, p < INT64_MAX ? p + 1 : p);
  if (o.seq_len) len = *o.seq_len;
  const schedule_table table = model::evaluate_schedule(m, len, precision);
  const rotary_spec spec = make_rotary_spec(table, m.rotary.head_dim, m.rotary.rotary_dim,
                                            m.rotary.layout);

  io::npy_array y;
  y.dtype = x.dtype;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  if (tokens > 0 && heads > 0)
    cpu::apply_rotary(spec, x.dtype == io::npy_dtype::f32 ? cpu::dtype::f32 : cpu::dtype::f16,
                      x.data.data(), y.data.data(), tokens, heads, pos.data());
  write_file_atomically(o.output, io::serialize_npy(y));
  if (from_float64)
    fmt::print(stderr, "grape: {}: float64 input rotated in float32; {} is float32\n", o.input, o.output);
}

const registrar reg{"apply", [](CLI::App& app) {
  auto opts = std::make_shared<apply_options>();
  auto* cmd = app.add_subcommand("apply", "Rotate a [tokens, heads, head_dim] .npy with a model's RoPE");
  cmd->add_option("--config", opts->config, "config.json of a rotary model")->required();
  cmd->add_option("--input", opts->input,
                  "float32/float16 .npy, [tokens, heads, head_dim]; float64 is rounded to float32")
      ->required();
  cmd->add_option("--positions", opts->positions, "int32/int64 .npy, [tokens]")->required();
  cmd->add_option("--output", opts->output, "output .npy (same shape; same dtype, float32 for float64 input)")
      ->required();
  cmd->add_option("--seq-len", opts->seq_len,
                  "current sequence length for dynamic NTK / LongRoPE; default max(position) + 1");
  cmd->add_option("--precision", opts->precision, "frequency table: float32_reference (default: transformers' float32 values) or float64")
      ->check(CLI::IsMember({"float64", "float32_reference"}));
  cmd->callback([opts] { run(*opts); });
}};

}  // namespace

}  // namespace grape::cli

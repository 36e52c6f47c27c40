// grape detect --input X.npy --output Y.npy [--positions P.npy] [--config C] [--json]: which rotary
// encoding turned X into Y (detect.hpp), and with --config each difference from the config's
// encoding on one line. Exit 0: no difference (or nothing to compare), 1: differences, 2: bad input.
#include <fmt/format.h>

#include <Eigen/Core>
#include <cstring>
#include <iostream>

#include "cli/command_registry.hpp"
#include "cli/model_util.hpp"
#include "grape/detail/error.hpp"
#include "detect/detect.hpp"
#include "io/npy.hpp"

namespace grape::cli {

namespace {

struct detect_options {
  std::string input, output, positions, config;
  bool json = false;
};

template <class T>
double element(const io::npy_array& a, std::int64_t i) {
  T v;
  std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

double bf16_element(const io::npy_array& a, std::int64_t i) {
  std::uint16_t bits;
  std::memcpy(&bits, a.data.data() + i * 2, 2);
  return static_cast<double>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

// The tensor widened to float64, and the unit roundoff of the type it was stored in.
detect::tensor3 read_tensor(const std::string& path, double* roundoff) {
  const io::npy_array a = io::read_npy(path);
  if (a.shape.size() != 3)
    throw input_error(fmt::format("{}: must have shape [tokens, heads, head_dim] (got rank {})", path, a.shape.size()));
  detect::tensor3 t{a.shape[0], a.shape[1], a.shape[2], std::vector<double>(static_cast<std::size_t>(a.size()))};
  for (std::int64_t i = 0; i < a.size(); ++i) switch (a.dtype) {
      case io::npy_dtype::f32: t.values[i] = element<float>(a, i); break;
      case io::npy_dtype::f64: t.values[i] = element<double>(a, i); break;
      case io::npy_dtype::f16: t.values[i] = static_cast<double>(Eigen::numext::bit_cast<Eigen::half>(
                                   static_cast<std::uint16_t>(element<std::uint16_t>(a, i)))); break;
      case io::npy_dtype::u16: t.values[i] = bf16_element(a, i); break;
      default:
        throw input_error(fmt::format("{}: must be float32, float16, float64 or bfloat16 stored as uint16 (got {})",
                                      path, io::dtype_descr(a.dtype)));
    }
  switch (a.dtype) {
    case io::npy_dtype::f16: *roundoff = 0x1p-11; break;
    case io::npy_dtype::u16: *roundoff = 0x1p-8; break;
    case io::npy_dtype::f64: *roundoff = 0x1p-53; break;
    default: *roundoff = 0x1p-24;
  }
  return t;
}

void run(const detect_options& o) {
  std::optional<model::model_description> m;
  if (!o.config.empty()) {
    m = model::load_model_config(o.config);
    if (m->kind != model::encoding_kind::rotary)
      throw input_error(fmt::format("{}: {} model: detect compares rotary encodings only", o.config, to_string(m->kind)));
  }
  detect::detect_input in;
  in.before = read_tensor(o.input, &in.input_roundoff);
  in.after = read_tensor(o.output, &in.output_roundoff);
  if (!o.positions.empty()) in.positions = read_positions(o.positions, in.before.tokens);
  const detect::detection d = detect::detect(in);

  std::vector<detect::finding> findings;
  if (m) {
    const auto& r = m->rotary;
    findings = detect::compare(d, in, {r.schedule, r.layout, r.head_dim, r.rotary_dim, m->max_position_embeddings});
  }
  if (o.json) {
    std::cout << detect::report_json(d, m ? &findings : nullptr);
  } else {
    std::cout << detect::report_text(d);
    if (m) {
      std::cout << fmt::format("compared with {}: {}\n", o.config,
                               findings.empty() ? "no difference"
                                               : fmt::format("{} difference{}", findings.size(),
                                                             findings.size() == 1 ? "" : "s"));
      if (d.found)
        for (const auto& f : findings) std::cout << f.text << "\n";
    }
  }
  exit_code() = findings.empty() ? 0 : 1;
}

const registrar reg{"detect", [](CLI::App& app) {
  auto opts = std::make_shared<detect_options>();
  auto* cmd = app.add_subcommand("detect", "Identify the RoPE another engine applied, from Q (or K) before and after");
  cmd->add_option("--input", opts->input, "Q or K before the rotation: .npy [tokens, heads, head_dim], float32, "
                                          "float16, float64 or bfloat16 stored as uint16")->required();
  cmd->add_option("--output", opts->output, "the same tensor after the engine's rotation (same shape)")->required();
  cmd->add_option("--positions", opts->positions, "int32/int64 .npy [tokens]; default: consecutive, up to an offset");
  cmd->add_option("--config", opts->config, "config.json: print each difference from its encoding");
  cmd->add_flag("--json", opts->json, "the report as JSON");
  cmd->callback([opts] { run(*opts); });
}};

}  // namespace

}  // namespace grape::cli

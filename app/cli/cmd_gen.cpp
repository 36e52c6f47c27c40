// grape gen --config CONFIG --target cpp|cuda --out FILE [--name N] [--seq-len N] [--precision P]:
// one self-contained source file that applies the model's rotary encoding;
// grape gen --encoding NAME --target cpp|cuda --out FILE [--name N]: the same for a built-in
// encoding's instance at its default parameters (src/gen, docs/generated-kernels.md). A type of the
// user's own (--header, --type) is the Python package's `grape` command's (grape/__main__.py).
#include <boost/hana/for_each.hpp>
#include <fmt/format.h>

#include <optional>

#include "cli/command_registry.hpp"
#include "cli/model_util.hpp"
#include "gen/instance_gen.hpp"
#include "gen/kernel_gen.hpp"
#include "grape/builtins.hpp"
#include "grape/detail/describe.hpp"
#include "grape/detail/error.hpp"

namespace grape::cli {

namespace {

struct gen_options {
  std::string config;
  std::string encoding;
  std::string target;
  std::string out;
  std::string name;
  std::optional<std::int64_t> seq_len;
  std::optional<std::string> precision;
  std::string header, type;  // a user's own type: the Python package's command (grape/__main__.py)
};

// The built-in encoding named o.encoding, made at its default parameters and baked.
void run_encoding(const gen_options& o, gen::target target) {
  bool found = false;
  boost::hana::for_each(builtin_encodings, [&](auto type) {
    using E = typename decltype(type)::type;
    if (found || E::name != o.encoding) return;
    found = true;
    if constexpr (!gen::bakeable_instance<typename E::instance>()) {
      throw input_error(fmt::format(
          "--encoding {}: grape gen bakes encodings that rotate Q and K through a view; this one's "
          "injection is '{}'",
          o.encoding, E::injection::description));
    } else {
      const std::string name = o.name.empty() ? gen::sanitize_name(E::name) : gen::sanitize_name(o.name);
      const auto params = E::default_params();
      const std::vector<std::string> provenance = {
          fmt::format("Encoding: {} ({})", E::name, E::summary),
          fmt::format("Parameters: default_params(): {}", detail::describe_params(params)),
      };
      const gen::generated_kernel k = gen::generate_instance_source(E::make(params), name, provenance, target);
      write_file_atomically(o.out, k.source);
      fmt::print("{}: {} written ({}, encoding {})\n", o.out, k.entry, o.target, E::name);
    }
  });
  if (!found)
    throw input_error(fmt::format("--encoding {}: no such built-in encoding (`grape list --names` names them)",
                                  o.encoding));
}

void run(const gen_options& o) {
  if (!o.header.empty() || !o.type.empty())
    throw input_error("gen: --header and --type compile a type of your own against the Python package's sdk: run "
                      "the `grape` command that `pip install` puts on PATH (or python -m grape)");
  if (o.config.empty() == o.encoding.empty())
    throw input_error("gen: give exactly one of --config and --encoding");
  const gen::target target = gen::parse_target(o.target);
  if (!o.encoding.empty()) {
    if (o.seq_len || o.precision)
      throw input_error("--seq-len and --precision evaluate a config's schedule: use them with --config");
    return run_encoding(o, target);
  }
  const std::string name = o.name.empty() ? gen::model_name_from_path(o.config) : gen::sanitize_name(o.name);
  const auto e =
      evaluate_model(o.config, o.seq_len, parse_precision(o.precision.value_or("float32_reference")));
  const auto& m = e.desc;
  if (m.kind != model::encoding_kind::rotary)
    throw input_error(fmt::format(
        "{}: this {} model has no rotary encoding to generate a kernel for (its positions enter "
        "as a score bias)",
        o.config, model::to_string(m.kind)));
  gen::kernel_description k;
  k.name = name;
  k.spec = e.spec;
  const auto& s = m.rotary.schedule;
  k.provenance = {
      fmt::format("Model: {} (model_type {})", e.label, m.model_type.empty() ? "none" : m.model_type),
      fmt::format("Schedule: {}{}, base {}{}, evaluated at sequence length {} ({} frequencies)",
                  to_string(s.type), m.rotary.source.empty() ? "" : " from " + m.rotary.source,
                  s.base, s.type == rope_type::default_rope ? "" : fmt::format(", factor {}", s.factor),
                  e.table.seq_len, to_string(e.table.precision)),
  };
  if (s.type == rope_type::dynamic || s.type == rope_type::longrope)
    k.provenance.push_back(
        "This schedule depends on the sequence length: regenerate with --seq-len for another.");
  write_file_atomically(o.out, gen::generate_source(k, target));
  fmt::print("{}: {} written ({}, head_dim {}, rotary_dim {}, {})\n", o.out,
             gen::entry_point_name(name, target), o.target, k.spec.head_dim, k.spec.rotary_dim,
             math::layout_name(k.spec.layout));
}

const registrar reg{"gen", [](CLI::App& app) {
  auto opts = std::make_shared<gen_options>();
  auto* cmd = app.add_subcommand(
      "gen", "Write one self-contained C++ or CUDA source that applies a model's rotary encoding "
             "or a built-in encoding's");
  cmd->add_option("--config", opts->config, "a Hugging Face style config.json (rotary models)");
  cmd->add_option("--encoding", opts->encoding,
                  "a built-in encoding (grape list) that rotates Q and K, at its default parameters; "
                  "instead of --config");
  cmd->add_option("--header", opts->header,
                  "with --type: a C++ encoding type of your own (the `grape` command of the Python package)");
  cmd->add_option("--type", opts->type, "the C++ type in --header, e.g. \"quaternion_rope<>\"");
  cmd->add_option("--target", opts->target, "cpp (C++17, standard library only) or cuda")->required();
  cmd->add_option("--out", opts->out, "the source file to write")->required();
  cmd->add_option("--name", opts->name,
                  "model name in the entry point grape_<name>_rope or grape_<name>_encode (default: "
                  "the config's folder, or the encoding's name)");
  cmd->add_option("--seq-len", opts->seq_len,
                  "sequence length the schedule is evaluated at (dynamic NTK, LongRoPE); default "
                  "max_position_embeddings");
  cmd->add_option("--precision", opts->precision,
                  "frequency table: float32_reference (default: transformers' float32 values) or "
                  "float64 (the formulas)");
  cmd->callback([opts] { run(*opts); });
}};

}  // namespace

}  // namespace grape::cli

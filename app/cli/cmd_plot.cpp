// grape plot CONFIG|NAME --kind heatmap|bands|decay --out FILE.png|.svg: pictures of an encoding
// drawn with gnuplot (a script and data files in a temp directory; the picture is written next to
// --out and renamed, so a failed plot leaves nothing behind).
#include <fmt/format.h>
#include <fmt/os.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "cli/command_registry.hpp"
#include "cli/model_util.hpp"
#include "grape/detail/error.hpp"
#include "model/model_json.hpp"

namespace grape::cli {

namespace {

namespace fs = std::filesystem;

struct plot_options {
  std::string model = "rope";
  std::string kind;
  std::string out;
  std::optional<std::int64_t> seq_len;
  std::int64_t positions = 256;  // heatmap rows
};

// A temp directory removed on scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "grape-plot-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw input_error("plot: cannot create a temp directory");
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string quoted(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += c == '\'' ? std::string("''") : std::string(1, c);
  return s + "'";
}

std::string shell_quoted(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

bool has_terminal(const char* name) {
  const std::string cmd = fmt::format("gnuplot -e 'set terminal {}' >/dev/null 2>&1", name);
  const int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

std::string terminal_for(const std::string& out) {
  const std::string ext = fs::path(out).extension().string();
  if (ext == ".svg") return "svg size 900,600 dynamic background rgb 'white'";
  if (ext == ".png") return has_terminal("pngcairo") ? "pngcairo size 900,600" : "png size 900,600";
  throw input_error(fmt::format("--out: must end in .png or .svg (got {})", out));
}

void heatmap(const evaluated_model& e, const plot_options& o, const fs::path& dir, std::string& script) {
  const auto& t = e.table;
  const int n = static_cast<int>(t.inv_freq.size());
  const std::int64_t rows = std::clamp<std::int64_t>(o.positions, 1, 4096);
  {
    auto f = fmt::output_file((dir / "table.dat").string());
    for (std::int64_t p = 0; p < rows; ++p) {
      for (int c = 0; c < 2 * n; ++c) {
        const double angle = static_cast<double>(p) * t.inv_freq[c % n];
        const double v = t.attention_factor * (c < n ? std::cos(angle) : std::sin(angle));
        f.print("{:.6f}{}", v, c + 1 < 2 * n ? " " : "\n");
      }
    }
  }
  script += fmt::format(
      "set title \"{}: af cos (columns 0..{}) and af sin ({}..{}) of position x inv_freq\" noenhanced\n"
      "set xlabel 'table column (plane i: cos, then sin)'\nset ylabel 'position'\n"
      "set palette defined (-1 '#2166ac', 0 'white', 1 '#b2182b')\nset cbrange [{}:{}]\n"
      "set xrange [-0.5:{}.5]\nset yrange [-0.5:{}.5]\n"
      "plot {} matrix with image notitle\n",
      e.label, n - 1, n, 2 * n - 1, -t.attention_factor, t.attention_factor, 2 * n - 1, rows - 1,
      quoted(dir / "table.dat"));
}

void bands(const evaluated_model& e, const fs::path& dir, std::string& script) {
  const auto& t = e.table;
  const auto& s = e.desc.rotary.schedule;
  {
    auto f = fmt::output_file((dir / "bands.dat").string());
    for (std::size_t i = 0; i < t.inv_freq.size(); ++i)
      f.print("{} {:.17g} {:.17g} {}\n", i, model::wavelength(t.inv_freq[i]),
              model::wavelength(t.base_inv_freq[i]), static_cast<int>(t.bands[i]));
  }
  const std::int64_t orig = s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings
                                                                   : e.desc.max_position_embeddings;
  const std::string d = quoted(dir / "bands.dat");
  // The planes exactly: autoscaling would round 63 up to the next tick, 70.
  const std::size_t last_plane = std::max<std::size_t>(t.inv_freq.size(), 2) - 1;
  script += fmt::format(
      "set title \"{}: wavelength per plane, schedule {}\" noenhanced\n"
      "set xlabel 'plane i'\nset ylabel 'wavelength 2{{/Symbol p}}/{{/Symbol q}}_i (tokens)'\n"
      "set xrange [0:{}]\nset logscale y\nset key left top\n",
      e.label, to_string(s.type), last_plane);
  std::string lines;
  if (orig > 0) {
    script += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead dt 2 lc rgb 'black'\n"
                          "set label 'original context {0}' at graph 0.02, first {0} offset 0,0.7\n",
                          orig);
  }
  script += fmt::format(
      "plot {0} using 1:3 with lines lc rgb '#999999' title 'unscaled base^(-2i/d)' noenhanced, "
      "{0} using 1:($4==0?$2:1/0) with points pt 7 lc rgb '#1b9e77' title 'kept', "
      "{0} using 1:($4==2?$2:1/0) with points pt 7 lc rgb '#d95f02' title 'blended', "
      "{0} using 1:($4==1?$2:1/0) with points pt 7 lc rgb '#7570b3' title 'interpolated'\n",
      d);
}

// Distances 1 .. span, log-spaced (the decay is read on a log axis; even steps would alias).
std::vector<std::int64_t> distances(std::int64_t span) {
  std::vector<std::int64_t> d;
  const int samples = 3000;
  for (int k = 0; k <= samples; ++k) {
    const auto v = static_cast<std::int64_t>(std::llround(std::pow(static_cast<double>(span), k / double(samples))));
    if (d.empty() || v > d.back()) d.push_back(v);
  }
  return d;
}

void decay(const evaluated_model& e, const fs::path& dir, std::string& script) {
  const auto& m = e.desc;
  const std::int64_t span = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  const std::int64_t orig = m.kind == model::encoding_kind::rotary
                                ? m.rotary.schedule.original_max_position_embeddings
                                : 0;
  auto f = fmt::output_file((dir / "decay.dat").string());
  // The distances drawn, exactly (not rounded up to the next decade), and room on the right for
  // the last tick label, which gnuplot centres on its tick and would otherwise clip.
  script += fmt::format("set logscale x\nset xrange [1:{}]\nset rmargin 6\n"
                        "set xlabel 'relative distance (tokens)'\n",
                        std::max<std::int64_t>(span, 2));
  if (orig > 0)
    script += fmt::format("set arrow from first {0}, graph 0 to first {0}, graph 1 nohead dt 2\n"
                          "set label 'original context {0}' at first {0}, graph 0.95 right offset -0.5,0\n",
                          orig);
  if (m.kind == model::encoding_kind::rotary) {
    const auto& t = e.table;
    const double af2 = t.attention_factor * t.attention_factor;
    const double n = static_cast<double>(t.inv_freq.size());
    for (std::int64_t delta : distances(span)) {
      double sum = 0;
      for (double th : t.inv_freq) sum += std::cos(static_cast<double>(delta) * th);
      f.print("{} {:.17g}\n", delta, sum * af2 / n);
    }
    f.close();
    script += fmt::format(
        "set title \"{}: expected score vs distance, sum_i cos(D theta_i) af^2/(d/2)\" noenhanced\n"
        "set ylabel 'score (q = k, equal energy per plane)'\n"
        "plot {} using 1:2 with lines lw 1.2 notitle\n",
        e.label, quoted(dir / "decay.dat"));
  } else if (m.kind == model::encoding_kind::alibi) {
    const std::size_t heads = std::min<std::size_t>(m.alibi.slopes.size(), 8);
    for (std::int64_t delta : distances(span)) {
      f.print("{}", delta);
      for (std::size_t h = 0; h < heads; ++h) f.print(" {:.17g}", -m.alibi.slopes[h] * delta);
      f.print("\n");
    }
    f.close();
    script += fmt::format(
        "set title \"{}: ALiBi bias -slope_h |i-j| (first {} heads)\" noenhanced\n"
        "set ylabel 'bias'\nset key left bottom\n"
        "plot for [h=2:{}] {} using 1:h with lines title sprintf('head %d', h-2)\n",
        e.label, heads, heads + 1, quoted(dir / "decay.dat"));
  } else {
    throw input_error(fmt::format("{}: plot --kind decay needs a rotary or ALiBi model (T5 biases are "
                                  "learned; see grape inspect for its buckets)", e.label));
  }
}

void run(const plot_options& o) {
  const auto e = evaluate_model(o.model, o.seq_len, frequency_precision::float64, true);
  if ((o.kind == "heatmap" || o.kind == "bands") && e.desc.kind != model::encoding_kind::rotary)
    throw input_error(fmt::format("{}: plot --kind {} needs a rotary model (this one is {})", e.label,
                                  o.kind, to_string(e.desc.kind)));
  const std::string terminal = terminal_for(o.out);
  temp_dir dir;
  const fs::path out_tmp = fs::path(o.out).string() + ".tmp-plot";
  std::string script = fmt::format("set terminal {}\nset output {}\n", terminal, quoted(out_tmp));
  if (o.kind == "heatmap") heatmap(e, o, dir.path, script);
  else if (o.kind == "bands") bands(e, dir.path, script);
  else decay(e, dir.path, script);
  script += "unset output\n";
  {
    std::ofstream s(dir.path / "plot.gp");
    s << script;
  }
  const std::string cmd = fmt::format("gnuplot {} 2>{}", shell_quoted(dir.path / "plot.gp"),
                                      shell_quoted(dir.path / "err.txt"));
  const int rc = std::system(cmd.c_str());
  std::error_code ec;
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    fs::remove(out_tmp, ec);
    std::ifstream err(dir.path / "err.txt");
    std::string line, last;
    while (std::getline(err, line))
      if (!line.empty()) last = line;
    throw input_error(fmt::format("plot: gnuplot failed ({}){}", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc,
                                  last.empty() ? "" : ": " + last));
  }
  fs::rename(out_tmp, o.out, ec);
  if (ec) {
    fs::remove(out_tmp, ec);
    throw input_error(fmt::format("{}: cannot write the picture", o.out));
  }
}

const registrar reg{"plot", [](CLI::App& app) {
  auto opts = std::make_shared<plot_options>();
  auto* cmd = app.add_subcommand("plot", "Draw an encoding: table heatmap, wavelength bands, score decay");
  cmd->add_option("model", opts->model, "config.json, or a built-in name: rope (d 128, base 10000)");
  cmd->add_option("--kind", opts->kind, "heatmap, bands or decay")
      ->required()
      ->check(CLI::IsMember({"heatmap", "bands", "decay"}));
  cmd->add_option("--out", opts->out, "output picture, .png or .svg")->required();
  cmd->add_option("--seq-len", opts->seq_len, "current sequence length (dynamic NTK, LongRoPE)");
  cmd->add_option("--positions", opts->positions, "heatmap: number of positions (rows), max 4096");
  cmd->callback([opts] { run(*opts); });
}};

}  // namespace

}  // namespace grape::cli

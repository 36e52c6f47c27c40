// A representation written as a user exploring the mathematics first writes it — the element
// function in float64 and float32, the key action and the generator, no view() — is checked: its
// mathematical laws run and hold, and the laws that need the kernels say why they did not run.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grape/check/checker.hpp"
#include "grape/check/report_json.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/view/concepts.hpp"

namespace grape {
namespace {

/// Planes (2i, 2i+1) turned by m·θ_i, computed with std::cos and std::sin of a float64 angle.
struct plain_planes {
  static constexpr int rank = 1;
  static constexpr key_pairing pairing = key_pairing::same;
  std::vector<double> theta;

  int dim() const { return 2 * static_cast<int>(theta.size()); }
  template <class T>
  void apply(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    for (std::size_t i = 0; i < theta.size(); ++i) {
      const double a = std::fmod(static_cast<double>(c[0]) * theta[i], 2 * M_PI);
      const T cs = static_cast<T>(std::cos(a)), sn = static_cast<T>(std::sin(a));
      y[2 * i] = cs * x[2 * i] - sn * x[2 * i + 1];
      y[2 * i + 1] = sn * x[2 * i] + cs * x[2 * i + 1];
    }
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
  Eigen::MatrixXd generator(int) const {
    Eigen::MatrixXd L = Eigen::MatrixXd::Zero(dim(), dim());
    for (std::size_t i = 0; i < theta.size(); ++i) L(2 * i + 1, 2 * i) = theta[i], L(2 * i, 2 * i + 1) = -theta[i];
    return L;
  }
};
static_assert(RepresentationOfRank<plain_planes, 1> && !KernelRepresentation<plain_planes>);

struct view_less_rope : encoding<translation<1>, plain_planes, rotate_qk<layout_kind::interleaved>> {
  static constexpr std::string_view name = "view_less_rope";
  static constexpr std::string_view summary = "RoPE's planes without a view";
  static constexpr law_set claims = rotary_laws;
  static constexpr std::int64_t position_limit = 1 << 20;  // a float64 angle: exact enough this far
  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64&) { return {8}; }
  static instance make(const params& p) { return {plain_planes{{1.0, 0.1, 0.01, 0.001}}, p.head_dim, 1.0}; }
};

TEST(ViewLess, MathematicalLawsRunAndKernelRowsSayWhyNot) {
  const auto report = check<view_less_rope>(check_options{});
  EXPECT_TRUE(report.passed()) << report.table();
  for (const law l : {law::group, law::homomorphism, law::relative, law::norm_preservation, law::reference_agreement,
                      law::float32_agreement}) {
    const auto* row = report.find(l);
    ASSERT_NE(row, nullptr) << to_string(l) << "\n" << report.table();
    EXPECT_EQ(row->status, law_status::holds) << report.table();
    EXPECT_EQ(row->trials, 100) << report.table();
  }
  for (const char* kernel : {"cpu_kernel", "cuda_body_emulated", "attention_kernel", "attention_shift"}) {
    const auto* row = report.find(kernel);
    ASSERT_NE(row, nullptr) << kernel << " has no row\n" << report.table();
    EXPECT_EQ(row->status, law_status::not_run) << report.table();
    EXPECT_FALSE(row->claimed);
    EXPECT_EQ(row->trials, 0);
    EXPECT_EQ(row->why_not_run, "no view() — see docs/concepts.md");
  }
  EXPECT_EQ(report.find("lift_kernel"), nullptr) << "a rotation is not a lift\n" << report.table();
  const std::string table = report.table();
  EXPECT_NE(table.find("cpu_kernel                 -        not run: no view() — see docs/concepts.md"),
            std::string::npos)
      << table;
  const nlohmann::json j = report;
  bool found = false;
  for (const auto& row : j.at("laws"))
    if (row.at("law") == "cpu_kernel") {
      found = true;
      EXPECT_FALSE(row.at("run").get<bool>());
      EXPECT_EQ(row.at("why_not_run"), "no view() — see docs/concepts.md");
    }
  EXPECT_TRUE(found) << j.dump(2);
}

}  // namespace
}  // namespace grape

// Expected: "grape: this representation has no device-safe view"
#include <Eigen/Core>
#include <array>
#include <cstdint>

#include "cpu/encode_qk.hpp"

// A representation that the checker accepts but that never said how a kernel runs it.
struct identity_rep {
  static constexpr int rank = 1;
  static constexpr grape::key_pairing pairing = grape::key_pairing::same;
  int dim() const { return 2; }
  template <class T>
  void apply(const std::array<std::int64_t, 1>&, const T* x, T* y) const { y[0] = x[0], y[1] = x[1]; }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const { apply(c, x, y); }
  Eigen::MatrixXd generator(int) const { return Eigen::MatrixXd::Zero(2, 2); }
};

void run(const grape::rotate_instance<identity_rep, grape::layout_kind::interleaved, grape::layout_kind::interleaved>& inst,
         const grape::cpu::rotate_qk_args& args) {
  grape::cpu::rotate_qk(inst, args);
}

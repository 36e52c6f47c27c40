// Linked into every test program: Eigen's own GEMM runs on the calling thread. The float64
// references (matrix exponentials of d×d generators) multiply small matrices, and Eigen's OpenMP
// parallelisation of them opened about 100 parallel regions per property trial; under `ctest -j2`
// two such processes' waiting threads starve each other (a test of 2 s alone took 68 s). The
// kernels' own OpenMP loops are untouched.
#include <Eigen/Core>

namespace {
const bool eigen_on_one_thread = (Eigen::setNbThreads(1), true);
}  // namespace

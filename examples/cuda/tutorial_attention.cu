// The tutorial's encodings in the CUDA fused attention (docs/tutorial.md, 3.2): what a .cu file of
// yours holds so that cuda::attention (kernels/cuda/attention_cuda.hpp, host code) runs them —
// the flash and decode kernels of a score view and the rotation kernels of a representation's view.
// Built with the GPU check (tests/gpu/run.sh, which runs them against cpu::attention) and by the tests.
#include "cuda/decode_launch.cuh"
#include "cuda/encode_qk_cuda.cuh"
#include "cuda/flash_launch.cuh"
#include "log_distance.hpp"
#include "quaternion_turns.hpp"

GRAPE_FLASH_SCORE_VIEW(log_distance_bias::view)      // part 3's bias, every storage type
GRAPE_DECODE_SCORE_VIEW(log_distance_bias::view)     // the same bias in decode over a paged cache
GRAPE_CUDA_ENCODE_QK(quaternion_turns, interleaved)  // part 2's representation

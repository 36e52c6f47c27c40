// The CUDA flash attention for __half storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/flash_launch.cuh"

GRAPE_FLASH_INSTANCES(f16)

// The CUDA flash attention for __nv_bfloat16 storage (one translation unit per dtype keeps nvcc time down).
#include "cuda/flash_launch.cuh"

GRAPE_FLASH_INSTANCES(bf16)

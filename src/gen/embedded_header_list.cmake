# The library headers `grape gen` embeds as text (embed_headers.cmake), in dependency order: each
# only includes earlier ones and the standard library, and all are device-safe (no Eigen, no std
# containers). The math headers carry a rotary_spec kernel; a view kernel (an encoding's instance)
# carries them and the view headers.
set(GRAPE_GEN_MATH_HEADERS grape/config.hpp grape/math/phase.hpp grape/math/sincos.hpp grape/math/rotate.hpp)
set(GRAPE_GEN_VIEW_HEADERS grape/math/dot.hpp grape/math/rank2.hpp grape/view/planes.hpp
    grape/view/scaled_planes.hpp grape/view/rank2.hpp grape/view/skew.hpp)
# A CUDA source also carries the CUDA kernels' storage conversions (from kernels/, after the math).
set(GRAPE_GEN_CUDA_HEADERS cuda/storage.hpp)

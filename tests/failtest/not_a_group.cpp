// Expected: "grape: the first argument of encoding<G, R, I> is not a Group"
#include "grape/encoding.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
struct positions {};  // no element, compose, inverse...
struct bad : grape::encoding<positions, grape::rotation_planes<1>, grape::rotate_qk<grape::layout_kind::half_split>> {};
bad::instance x;

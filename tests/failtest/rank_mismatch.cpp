// Expected: "grape: the representation's rank differs from the group's"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
struct bad : grape::encoding<grape::translation<1>, grape::rotation_planes<3>, grape::rotate_qk<grape::layout_kind::half_split>> {};
bad::instance x;

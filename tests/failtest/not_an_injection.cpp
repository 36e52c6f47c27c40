// Expected: "grape: the third argument of encoding<G, R, I> is not an Injection"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/rep/rotation_planes.hpp"
struct somewhere {};
struct bad : grape::encoding<grape::translation<1>, grape::rotation_planes<1>, somewhere> {};
int main() { return sizeof(bad); }

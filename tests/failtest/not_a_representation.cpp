// Expected: "grape: the second argument of encoding<G, R, I> is not a RepresentationOf<R, G>"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
struct half_rep {  // has rank and pairing but no apply or generator
  static constexpr int rank = 1;
  static constexpr grape::key_pairing pairing = grape::key_pairing::same;
  int dim() const { return 2; }
};
struct bad : grape::encoding<grape::translation<1>, half_rep, grape::rotate_qk<grape::layout_kind::half_split>> {};
int main() { return sizeof(bad); }

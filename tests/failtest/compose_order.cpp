// Expected: "grape: compose<A, B> takes a rotate_qk injection first and a score_bias second"
#include "grape/encodings/alibi.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/rotate_qk.hpp"
using bad = grape::compose<grape::score_bias<grape::alibi_bias>, grape::rotate_qk<grape::layout_kind::half_split>>;
int main() { return static_cast<int>(bad::kind); }

// Expected: "grape: check<E> needs an Encoding"
#include "grape/check/checker.hpp"
struct not_an_encoding {
  struct params {};
};
int main() { return grape::check<not_an_encoding>(grape::check_options{}).passed() ? 0 : 1; }

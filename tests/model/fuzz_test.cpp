// Random and mutated bytes fed to the config parser and the .npy reader: the only exception ever
// thrown is grape::input_error (the suite also runs under ASan/UBSan, which catch the rest).
// Bounded: 100 rapidcheck cases x a few inputs each.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "grape/detail/error.hpp"
#include "io/npy.hpp"
#include "model/model_config.hpp"
#include "model/model_json.hpp"

namespace {

std::vector<std::string> bundled_configs() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    for (const auto& e : std::filesystem::directory_iterator(std::string(GRAPE_SOURCE_DIR) + "/examples/configs")) {
      std::ifstream in(e.path() / "config.json");
      std::ostringstream ss;
      ss << in.rdbuf();
      t.push_back(ss.str());
    }
    std::sort(t.begin(), t.end());
    return t;
  }();
  return texts;
}

// A few edits of one of: a byte flip, a deletion, an insertion of JSON-ish or random bytes,
// a truncation, a number swapped for an extreme one.
std::string mutate(std::string s) {
  static const std::vector<std::string> tokens = {
      "-1", "0", "1e308", "-1e308", "1e400", "3.5", "99999999999999999999", "null", "true", "\"x\"",
      "[]", "{}", "[1,2]", "{\"type\":\"yarn\"}", ",", ":", "\"", "{", "}", "\\u0000", "\xff", "0.0"};
  const int edits = *rc::gen::inRange(1, 6);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = s.empty() ? 0 : *rc::gen::inRange<std::size_t>(0, s.size());
    switch (*rc::gen::inRange(0, 5)) {
      case 0:
        if (!s.empty()) s[at] = static_cast<char>(*rc::gen::arbitrary<unsigned char>());
        break;
      case 1:
        if (!s.empty()) s.erase(at, *rc::gen::inRange<std::size_t>(1, 16));
        break;
      case 2:
        s.insert(at, *rc::gen::elementOf(tokens));
        break;
      case 3:
        s.resize(at);
        break;
      case 4: {
        // Replace the number at or after `at` with an extreme token.
        const auto p = s.find_first_of("0123456789", at);
        if (p != std::string::npos) {
          const auto q = s.find_first_not_of("0123456789.eE+-", p);
          s.replace(p, (q == std::string::npos ? s.size() : q) - p, *rc::gen::elementOf(tokens));
        }
        break;
      }
    }
  }
  return s;
}

void parse_config(const std::string& text) {
  try {
    const auto m = grape::model::parse_model_config(text, "fuzz/config.json");
    if (m.kind == grape::model::encoding_kind::rotary) {
      const auto t = grape::evaluate(m.rotary.schedule, m.max_position_embeddings);
      (void)grape::model::describe_json(m, &t).dump();
    } else {
      (void)grape::model::describe_json(m, nullptr).dump();
    }
  } catch (const grape::input_error&) {
  }
}

void parse_npy_bytes(const std::string& bytes) {
  try {
    (void)grape::io::parse_npy(bytes, "fuzz.npy");
  } catch (const grape::input_error&) {
  }
}

RC_GTEST_PROP(Fuzz, ConfigParserThrowsOnlyInputError, ()) {
  const auto configs = bundled_configs();
  RC_PRE(!configs.empty());
  for (int k = 0; k < 3; ++k) parse_config(mutate(*rc::gen::elementOf(configs)));
  parse_config(*rc::gen::container<std::string>(rc::gen::arbitrary<char>()));
}

RC_GTEST_PROP(Fuzz, NpyReaderThrowsOnlyInputError, ()) {
  grape::io::npy_array a;
  a.dtype = *rc::gen::element(grape::io::npy_dtype::f32, grape::io::npy_dtype::f16, grape::io::npy_dtype::f64,
                              grape::io::npy_dtype::i32, grape::io::npy_dtype::i64);
  a.shape = {*rc::gen::inRange<std::int64_t>(0, 4), *rc::gen::inRange<std::int64_t>(0, 4)};
  a.data.resize(static_cast<std::size_t>(a.size()) * grape::io::dtype_size(a.dtype));
  const std::string valid = grape::io::serialize_npy(a);
  for (int k = 0; k < 3; ++k) parse_npy_bytes(mutate(valid));
  // Only the header mutated, data length kept: reaches the shape and dtype checks more often.
  std::string header_only = valid;
  const std::size_t at = *rc::gen::inRange<std::size_t>(10, 64);
  header_only[at] = *rc::gen::elementOf(std::string("0123456789(),'<>fi248 TrueFals{}:"));
  parse_npy_bytes(header_only);
  parse_npy_bytes(*rc::gen::container<std::string>(rc::gen::arbitrary<char>()));
}

}  // namespace

// Code shown in the docs is code the tests build and run: every line of a doc's excerpt (a
// ```cpp block) must appear, trimmed, in the example it is taken from, in the same order
// (lines starting with "// ..." stand for omitted code).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read(const std::string& relative) {
  std::ifstream f(std::string(GRAPE_SOURCE_DIR) + "/" + relative);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// The lines of the first ```cpp block that follows `after` in a markdown file.
std::vector<std::string> excerpt(const std::string& doc, const std::string& after) {
  const auto anchor = doc.find(after);
  const auto start = doc.find("```cpp\n", anchor == std::string::npos ? 0 : anchor);
  const auto end = doc.find("```\n", start + 7);
  std::vector<std::string> lines;
  if (anchor == std::string::npos || start == std::string::npos || end == std::string::npos)
    return lines;
  std::stringstream block(doc.substr(start + 7, end - start - 7));
  for (std::string line; std::getline(block, line);)
    if (!trim(line).empty() && trim(line).rfind("// ...", 0) != 0) lines.push_back(trim(line));
  return lines;
}

void expect_excerpt_of(const std::string& doc_path, const std::string& after,
                       const std::string& example_path) {
  const std::vector<std::string> lines = excerpt(read(doc_path), after);
  ASSERT_FALSE(lines.empty()) << doc_path << " has no ```cpp block after \"" << after << "\"";
  const std::string example = read(example_path);
  ASSERT_FALSE(example.empty()) << example_path;
  std::size_t at = 0;
  for (const std::string& line : lines) {
    const auto found = example.find(line, at);
    ASSERT_NE(found, std::string::npos)
        << doc_path << ": \"" << line << "\" is not in " << example_path << " (after what precedes it)";
    at = found + line.size();
  }
}

TEST(doc_excerpts, cpu_kernels_fused_call_is_from_the_kv_cache_example) {
  expect_excerpt_of("docs/cpu-kernels.md", "is a prefill and a decode step", "examples/kv_cache_decode.cpp");
}

TEST(doc_excerpts, attention_call_is_from_the_attention_example) {
  expect_excerpt_of("docs/attention.md", "# Attention with the encoding inside", "examples/attention.cpp");
}

TEST(doc_excerpts, tutorial_kernel_call_is_from_the_tutorial) {
  expect_excerpt_of("docs/tutorial.md", "## 5. Run it in the kernels", "examples/tutorial.cpp");
}

TEST(doc_excerpts, tutorial_own_law_is_from_the_encoding_header) {
  expect_excerpt_of("docs/tutorial.md", "## 4. A law of your own", "examples/hour_of_day_rope.hpp");
}

TEST(doc_excerpts, tutorial_encoding_is_from_its_header) {
  expect_excerpt_of("docs/tutorial.md", "## 1. The group", "examples/cyclic_group.hpp");
}

}  // namespace

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

/// The lines of the ```cpp block that opens at `start` (npos: none).
std::vector<std::string> block_lines(const std::string& doc, std::size_t start) {
  std::vector<std::string> lines;
  if (start == std::string::npos) return lines;
  const auto end = doc.find("```\n", start + 7);
  if (end == std::string::npos) return lines;
  std::stringstream block(doc.substr(start + 7, end - start - 7));
  for (std::string line; std::getline(block, line);)
    if (!trim(line).empty() && trim(line).rfind("// ...", 0) != 0) lines.push_back(trim(line));
  return lines;
}

/// The lines of the first ```cpp block that follows `after` in a markdown file.
std::vector<std::string> excerpt(const std::string& doc, const std::string& after) {
  const auto anchor = doc.find(after);
  if (anchor == std::string::npos) return {};
  return block_lines(doc, doc.find("```cpp\n", anchor));
}

void expect_lines_in(const std::vector<std::string>& lines, const std::string& doc_path,
                     const std::string& example_path) {
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

void expect_excerpt_of(const std::string& doc_path, const std::string& after,
                       const std::string& example_path) {
  const std::vector<std::string> lines = excerpt(read(doc_path), after);
  ASSERT_FALSE(lines.empty()) << doc_path << " has no ```cpp block after \"" << after << "\"";
  expect_lines_in(lines, doc_path, example_path);
}

/// The file a block is taken from: the last `examples/...` or `include/...` path in backquotes on
/// the last non-empty line above it ("" when it names none).
std::string source_named_above(const std::string& doc, std::size_t start) {
  std::size_t end = start;
  while (end > 0 && doc[end - 1] == '\n') --end;
  const auto newline = doc.rfind('\n', end == 0 ? 0 : end - 1);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const std::string above = doc.substr(begin, end - begin);
  std::string source;
  for (auto at = above.find('`'); at != std::string::npos;) {
    const auto close = above.find('`', at + 1);
    if (close == std::string::npos) break;
    const std::string quoted = above.substr(at + 1, close - at - 1);
    if (quoted.rfind("examples/", 0) == 0 || quoted.rfind("include/", 0) == 0) source = quoted;
    at = above.find('`', close + 1);
  }
  return source;
}

TEST(doc_excerpts, cpu_kernels_fused_call_is_from_the_kv_cache_example) {
  expect_excerpt_of("docs/cpu-kernels.md", "is a prefill and a decode step", "examples/kv_cache_decode.cpp");
}

TEST(doc_excerpts, attention_call_is_from_the_attention_example) {
  expect_excerpt_of("docs/attention.md", "# Attention with the encoding inside", "examples/attention.cpp");
}

TEST(doc_excerpts, attention_backward_call_is_from_its_example) {
  expect_excerpt_of("docs/attention.md", "## Backward", "examples/attention_backward.cpp");
}

TEST(doc_excerpts, attention_decode_call_is_from_its_example) {
  expect_excerpt_of("docs/attention.md", "## Decode from the paged KV cache", "examples/attention_decode.cpp");
}

/// Every ```cpp block of the tutorial is an excerpt of the file named on the line above it, so
/// that none goes unchecked: the tutorial shows the code the tests build and run.
TEST(doc_excerpts, every_tutorial_block_is_from_the_file_it_names) {
  const std::string doc_path = "docs/tutorial.md";
  const std::string doc = read(doc_path);
  ASSERT_FALSE(doc.empty()) << doc_path;
  int blocks = 0;
  for (auto start = doc.find("```cpp\n"); start != std::string::npos; start = doc.find("```cpp\n", start + 7)) {
    const std::string source = source_named_above(doc, start);
    ASSERT_FALSE(source.empty()) << doc_path << ": the line above the block at offset " << start
                                 << " names no `examples/...` or `include/...` file";
    const std::vector<std::string> lines = block_lines(doc, start);
    ASSERT_FALSE(lines.empty()) << doc_path << ": empty block at offset " << start;
    expect_lines_in(lines, doc_path, source);
    ++blocks;
  }
  EXPECT_GE(blocks, 10);
}

}  // namespace

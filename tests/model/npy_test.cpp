// .npy reading and writing: round trips, the three header versions, and malformed files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "grape/detail/error.hpp"
#include "io/npy.hpp"

namespace {

using namespace grape::io;

// A file as NumPy writes it, built by hand here (not with the code under test).
std::string handmade(int major, const std::string& dict, const std::string& data) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const auto n = static_cast<std::uint32_t>(header.size());
  for (std::size_t k = 0; k < (major == 1 ? 2u : 4u); ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string error_of(const std::string& bytes) {
  try {
    (void)parse_npy(bytes, "x.npy");
  } catch (const grape::input_error& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, ReadsAllThreeHeaderVersions) {
  for (int major : {1, 2, 3}) {
    const auto a = parse_npy(handmade(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                      floats({1, 2, 3, 4})),
                             "x.npy");
    EXPECT_EQ(a.dtype, npy_dtype::f32);
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 2}));
    float v[4];
    std::memcpy(v, a.data.data(), 16);
    EXPECT_EQ(v[3], 4.0f);
  }
}

TEST(Npy, HeaderSpellings) {
  // Keys in another order, double quotes, a 1-tuple, a 0-d array.
  auto a = parse_npy(handmade(1, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i8\"}",
                              std::string(24, '\0')), "x.npy");
  EXPECT_EQ(a.dtype, npy_dtype::i64);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{3}));
  a = parse_npy(handmade(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (), }", std::string(2, '\0')), "x.npy");
  EXPECT_EQ(a.size(), 1);
  a = parse_npy(handmade(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 5), }", ""), "x.npy");
  EXPECT_EQ(a.size(), 0);
}

TEST(Npy, RoundTripsEveryDtypeThroughAFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("grape_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (auto t : {npy_dtype::f32, npy_dtype::f16, npy_dtype::f64, npy_dtype::i32, npy_dtype::i64}) {
    npy_array a;
    a.dtype = t;
    a.shape = {3, 1, 2};
    a.data.resize(6 * dtype_size(t));
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::byte>(i * 7 + 1);
    const auto path = (dir / "a.npy").string();
    write_npy(path, a);
    const auto b = read_npy(path);
    EXPECT_EQ(b.dtype, t);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
    const auto bytes = serialize_npy(a);
    EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u);  // data 64-byte aligned, as NumPy does
  }
  std::filesystem::remove_all(dir);
}

TEST(Npy, MalformedFilesNameTheFile) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string good = handmade(1, ok_dict, floats({1, 2}));
  ASSERT_EQ(error_of(good), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "bad magic"},
      {"\x93NUMPZ\x01\x00\x10\x00", "bad magic"},
      {good.substr(0, 9), "bad magic"},
      {good.substr(0, 40), "truncated .npy header"},
      {good.substr(0, good.size() - 1), "data"},
      {good + "xx", "data"},
      {handmade(4, ok_dict, floats({1, 2})), "version 4"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", floats({1, 2})), "fortran_order"},
      {handmade(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", floats({1, 2})), "dtype"},
      {handmade(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", floats({1, 2})), "dtype"},
      {handmade(1, "{'descr': '<f4', 'shape': (2,), }", floats({1, 2})), "header"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", floats({1, 2})), "header"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", floats({1, 2})), "header"},
      {handmade(1, "{'descr': '<f4, 'fortran_order': False}", ""), "header"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""), "header"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""), "header"},
      {handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
                floats({1})), "truncated .npy data"},
  };
  for (const auto& [bytes, what] : cases) {
    const auto msg = error_of(bytes);
    EXPECT_EQ(msg.rfind("grape: x.npy: ", 0), 0u) << "case " << what << ": " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_THROW((void)read_npy("/nonexistent/y.npy"), grape::input_error);
}

}  // namespace

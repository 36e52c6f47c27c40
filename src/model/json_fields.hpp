#pragma once
// Typed, checked access to config.json fields. Every failure is a grape::input_error of one line
// naming the file and the field's dotted path ("config.json: rope_scaling.factor: ...").
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace grape::model {

using json = nlohmann::json;

class json_fields {
 public:
  explicit json_fields(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  /// Parses text; malformed JSON or a top level that is not an object is an input_error.
  json parse(std::string_view text) const;

  [[noreturn]] void fail(std::string_view path, std::string_view what) const;

  // Each getter returns nullopt when the key is absent or null, and throws when the value has the
  // wrong type or is not finite. `prefix` is the dotted path of `obj` ("" at the top level).
  std::optional<double> number(const json& obj, std::string_view key, std::string_view prefix = {}) const;
  std::optional<std::int64_t> integer(const json& obj, std::string_view key,
                                      std::string_view prefix = {}) const;
  std::optional<bool> boolean(const json& obj, std::string_view key, std::string_view prefix = {}) const;
  std::optional<std::string> string(const json& obj, std::string_view key,
                                    std::string_view prefix = {}) const;
  const json* object(const json& obj, std::string_view key, std::string_view prefix = {}) const;
  std::optional<std::vector<double>> number_list(const json& obj, std::string_view key,
                                                 std::string_view prefix = {}) const;

  /// An integer in [lo, hi] (a sanity range: keeps hostile configs from sizing huge tables).
  std::optional<std::int64_t> integer_in(const json& obj, std::string_view key, std::int64_t lo,
                                         std::int64_t hi, std::string_view prefix = {}) const;

  static std::string join(std::string_view prefix, std::string_view key);
  /// A JSON value as it appeared, escaped and shortened, for "(got ...)".
  static std::string shown(const json& v);

 private:
  const json* find(const json& obj, std::string_view key) const;
  std::string file_;
};

}  // namespace grape::model

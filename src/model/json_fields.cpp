// Checked config.json field access (json_fields.hpp).
#include "model/json_fields.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "grape/detail/error.hpp"

namespace grape::model {

namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; keep the readable part and
// make sure the message stays on one line.
std::string json_message(const char* what) {
  std::string_view m{what};
  if (!m.empty() && m.front() == '[') {
    const auto close = m.find("] ");
    if (close != std::string_view::npos) m.remove_prefix(close + 2);
  }
  std::string out;
  for (char c : m) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  return out;
}

}  // namespace

json json_fields::parse(std::string_view text) const {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw input_error(fmt::format("{}: malformed JSON: {}", file_, json_message(e.what())));
  }
  if (!j.is_object()) throw input_error(fmt::format("{}: top level: must be a JSON object", file_));
  return j;
}

void json_fields::fail(std::string_view path, std::string_view what) const {
  throw input_error(fmt::format("{}: {}: {}", file_, path, what));
}

std::string json_fields::join(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

std::string json_fields::shown(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

const json* json_fields::find(const json& obj, std::string_view key) const {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> json_fields::number(const json& obj, std::string_view key,
                                          std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(join(prefix, key), fmt::format("must be a number (got {})", shown(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d)) fail(join(prefix, key), "must be a finite number");
  return d;
}

std::optional<std::int64_t> json_fields::integer(const json& obj, std::string_view key,
                                                 std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  const auto path = join(prefix, key);
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<std::int64_t>();
  if (v->is_number_unsigned()) {
    const auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) fail(path, fmt::format("out of range (got {})", u));
    return static_cast<std::int64_t>(u);
  }
  if (v->is_number_float()) {
    // Some exported configs write integers as 4096.0; accept integral values in range.
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      return static_cast<std::int64_t>(d);
  }
  fail(path, fmt::format("must be an integer (got {})", shown(*v)));
}

std::optional<std::int64_t> json_fields::integer_in(const json& obj, std::string_view key,
                                                    std::int64_t lo, std::int64_t hi,
                                                    std::string_view prefix) const {
  const auto v = integer(obj, key, prefix);
  if (v && (*v < lo || *v > hi))
    fail(join(prefix, key), fmt::format("must be in [{}, {}] (got {})", lo, hi, *v));
  return v;
}

std::optional<bool> json_fields::boolean(const json& obj, std::string_view key,
                                         std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(join(prefix, key), fmt::format("must be true or false (got {})", shown(*v)));
  return v->get<bool>();
}

std::optional<std::string> json_fields::string(const json& obj, std::string_view key,
                                               std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(join(prefix, key), fmt::format("must be a string (got {})", shown(*v)));
  return v->get<std::string>();
}

const json* json_fields::object(const json& obj, std::string_view key, std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return nullptr;
  if (!v->is_object()) fail(join(prefix, key), fmt::format("must be an object or null (got {})", shown(*v)));
  return v;
}

std::optional<std::vector<double>> json_fields::number_list(const json& obj, std::string_view key,
                                                            std::string_view prefix) const {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  const auto path = join(prefix, key);
  if (!v->is_array()) fail(path, fmt::format("must be a list of numbers (got {})", shown(*v)));
  std::vector<double> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number()) fail(fmt::format("{}[{}]", path, i), fmt::format("must be a number (got {})", shown(e)));
    const double d = e.get<double>();
    if (!std::isfinite(d)) fail(fmt::format("{}[{}]", path, i), "must be a finite number");
    out.push_back(d);
  }
  return out;
}

}  // namespace grape::model

//===- Json.h - the little JSON the runtime writes -------------*- C++ -*-===//
//
// cleave-run writes JSON in three places, the metrics lines, the header of
// a safetensors file and a checkpoint's manifest, and reads one: the
// manifest, on --resume. Strings, numbers, arrays and objects are all these
// need, so that is all there is (the runtime does not link LLVM).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_JSON_H
#define CLEAVE_RUNTIME_JSON_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace cleave::runtime {

/// `s` as a JSON string literal, quotes included.
inline std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}

/// The shortest text of `v` that reads back exactly (as Python's repr);
/// NaN and infinities, which JSON lacks, as null.
inline std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  // Integers as integers ("1000", not "1e+03").
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

/// A parsed JSON value. Numbers are doubles (what jsonNumber writes reads
/// back exactly); `null`, `true` and `false` are kept as their kinds.
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  /// The member `key` of an object, or null when absent or not an object.
  const JsonValue *find(const std::string &key) const {
    if (kind != Kind::Object)
      return nullptr;
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }
};

/// Parses `text` as one JSON value. On failure returns false with `error`
/// saying what was expected at which byte offset.
bool parseJson(const std::string &text, JsonValue &value, std::string &error);

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_JSON_H

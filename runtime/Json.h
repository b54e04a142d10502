//===- Json.h - the little JSON the runtime writes -------------*- C++ -*-===//
//
// cleave-run writes JSON in two places, the metrics lines and the header of
// a safetensors file; both need only strings and numbers, so this is all
// there is (the runtime does not link LLVM).
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_RUNTIME_JSON_H
#define CLEAVE_RUNTIME_JSON_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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

} // namespace cleave::runtime

#endif // CLEAVE_RUNTIME_JSON_H

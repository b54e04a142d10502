//===- Json.cpp - reading the little JSON the runtime writes --------------===//
//
// A recursive-descent parser for checkpoint manifests. It accepts standard
// JSON (RFC 8259); \u escapes outside ASCII are kept as UTF-8.
//
//===----------------------------------------------------------------------===//

#include "runtime/Json.h"

#include <cstring>

using namespace cleave::runtime;

namespace {

struct Parser {
  const std::string &text;
  size_t at = 0;
  std::string error;
  int depth = 0;

  bool fail(const std::string &what) {
    if (error.empty())
      error = what + " at byte " + std::to_string(at);
    return false;
  }
  void skipSpace() {
    while (at < text.size() && text[at] && std::strchr(" \t\r\n", text[at]))
      ++at;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(at, n, word) != 0)
      return fail(std::string("expected '") + word + "'");
    at += n;
    return true;
  }
  bool string(std::string &out) {
    if (at >= text.size() || text[at] != '"')
      return fail("expected a string");
    ++at;
    while (at < text.size() && text[at] != '"') {
      char c = text[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= text.size())
        break;
      char e = text[at++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        if (at + 4 > text.size())
          return fail("a short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i, ++at) {
          char h = text[at];
          int digit = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
          if (digit < 0)
            return fail("a bad \\u escape");
          code = code * 16 + unsigned(digit);
        }
        if (code < 0x80) {
          out += char(code);
        } else if (code < 0x800) {
          out += char(0xc0 | (code >> 6));
          out += char(0x80 | (code & 0x3f));
        } else {
          out += char(0xe0 | (code >> 12));
          out += char(0x80 | ((code >> 6) & 0x3f));
          out += char(0x80 | (code & 0x3f));
        }
        break;
      }
      default:
        return fail("an unknown escape");
      }
    }
    if (at >= text.size())
      return fail("an unterminated string");
    ++at;
    return true;
  }
  bool value(JsonValue &v) {
    if (++depth > 64)
      return fail("nesting deeper than 64");
    skipSpace();
    if (at >= text.size())
      return fail("expected a value, found the end");
    char c = text[at];
    bool ok = true;
    if (c == '{') {
      v.kind = JsonValue::Kind::Object;
      ++at;
      skipSpace();
      if (at < text.size() && text[at] == '}') {
        ++at;
      } else {
        while (ok) {
          skipSpace();
          std::string key;
          ok = string(key);
          skipSpace();
          if (ok && (at >= text.size() || text[at++] != ':'))
            ok = fail("expected ':'");
          if (ok)
            ok = value(v.object[key]);
          skipSpace();
          if (ok && at < text.size() && text[at] == ',') {
            ++at;
            continue;
          }
          if (ok && (at >= text.size() || text[at++] != '}'))
            ok = fail("expected ',' or '}'");
          break;
        }
      }
    } else if (c == '[') {
      v.kind = JsonValue::Kind::Array;
      ++at;
      skipSpace();
      if (at < text.size() && text[at] == ']') {
        ++at;
      } else {
        while (ok) {
          v.array.emplace_back();
          ok = value(v.array.back());
          skipSpace();
          if (ok && at < text.size() && text[at] == ',') {
            ++at;
            continue;
          }
          if (ok && (at >= text.size() || text[at++] != ']'))
            ok = fail("expected ',' or ']'");
          break;
        }
      }
    } else if (c == '"') {
      v.kind = JsonValue::Kind::String;
      ok = string(v.string);
    } else if (c == 't' || c == 'f') {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = c == 't';
      ok = literal(c == 't' ? "true" : "false");
    } else if (c == 'n') {
      ok = literal("null");
    } else {
      const char *begin = text.c_str() + at;
      char *end = nullptr;
      v.kind = JsonValue::Kind::Number;
      v.number = std::strtod(begin, &end);
      if (end == begin)
        ok = fail("expected a value");
      at += end - begin;
    }
    --depth;
    return ok;
  }
};

} // namespace

bool cleave::runtime::parseJson(const std::string &text, JsonValue &value,
                                std::string &error) {
  Parser p{text};
  value = JsonValue();
  bool ok = p.value(value);
  p.skipSpace();
  if (ok && p.at != text.size())
    ok = p.fail("unexpected text after the value");
  error = p.error;
  return ok;
}

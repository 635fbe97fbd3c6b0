#include "schedule/quote.h"

namespace pipetwin {
namespace {

// The length of the valid UTF-8 sequence at s[i] (2..4), or 0 where none starts there.
std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
  }
  if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
  if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
  if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
  if (c == 0xF4 && b(1) >= 0x90) return 0;  // beyond U+10FFFF
  return n;
}

// "\\xNN" (json: "\\u00NN") for one byte.
std::string Hex(bool json, unsigned char c) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out = json ? "\\u00" : "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 0xF];
  return out;
}

}  // namespace

std::string Quoted(std::string_view value) {
  std::string out = "'";
  std::size_t shown = 0;
  for (std::size_t i = 0; i < value.size();) {
    if (shown == kMaxQuotedChars) {
      out += "'... (" + std::to_string(value.size()) + " bytes)";
      return out;
    }
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += Hex(false, c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const std::size_t n = Utf8Length(value, i); n > 0) {
      out.append(value.substr(i, n));
      i += n;
      ++shown;
      continue;
    } else {
      out += Hex(false, c);
    }
    ++i;
    ++shown;
  }
  return out + "'";
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += Hex(true, c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const std::size_t n = Utf8Length(text, i); n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\\uFFFD";
    }
    ++i;
  }
  return out;
}

}  // namespace pipetwin

// quote.h — a value from an input file, shown in a message safely: quoted, at most 80
// characters, control characters and bytes that are not UTF-8 escaped (\n, \t, \xNN), so
// that a message stays one readable line whatever the file holds. JsonEscape is the same
// for a JSON string's contents (control characters as \u00XX, bad UTF-8 as U+FFFD).
//
//   Error::BadInput("model.preset: got " + Quoted(value));   // got 'gpt\x07...'
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pipetwin {

inline constexpr std::size_t kMaxQuotedChars = 80;

std::string Quoted(std::string_view value);
std::string JsonEscape(std::string_view text);

}  // namespace pipetwin

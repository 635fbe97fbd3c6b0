#include "schedule/action.h"

#include <array>
#include <charconv>

#include "schedule/quote.h"

namespace pipetwin {
namespace {

constexpr std::array<std::string_view, kNumActionKinds> kNames = {
    "F",           "B",           "I",       "W",           "SEND_F",
    "RECV_F",      "SEND_B",      "RECV_B",  "REDUCE_GRAD", "OPT",
    "WAIT_SEND_F", "WAIT_SEND_B", "UNSHARD", "RESHARD",     "WAIT_REDUCE_GRAD"};

bool ParseInt(std::string_view s, std::int32_t* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string_view KindName(ActionKind kind) { return kNames[static_cast<std::size_t>(kind)]; }

std::string Action::ToString() const {
  std::string out = std::to_string(stage);
  out += KindName(kind);
  if (HasMicrobatch(kind)) out += std::to_string(microbatch);
  return out;
}

namespace {

// A cell shown in a message: itself (quoted) when it could be a mistyped action, a short run
// of letters, digits and '_'; otherwise only its length. A `csv:` path may name any readable
// file (csv:/etc/passwd): its first line is not echoed.
std::string ShowCell(std::string_view text) {
  bool action_like = text.size() <= 24;
  for (const char c : text) {
    action_like = action_like && ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
                                  (c >= 'a' && c <= 'z') || c == '_');
  }
  if (action_like) return Quoted(text);
  return "of " + std::to_string(text.size()) +
         " characters (not shown: not made of letters, "
         "digits and '_' only, or longer than 24)";
}

}  // namespace

Expected<Action> Action::Parse(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return Error::BadInput("bad action " + ShowCell(text) + ": " + std::string(why) +
                           " (allowed: <stage><KIND><microbatch> with KIND one of F, B, I, W, "
                           "SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B; "
                           "<stage><KIND> with KIND one of REDUCE_GRAD, WAIT_REDUCE_GRAD, "
                           "UNSHARD, RESHARD, OPT; or (A;B)OVERLAP_F_B in a CSV cell)");
  };
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) return fail("it must start with a stage number");
  Action a;
  if (!ParseInt(text.substr(0, i), &a.stage)) return fail("stage number out of range");
  std::size_t j = i;
  while (j < text.size() && ((text[j] >= 'A' && text[j] <= 'Z') || text[j] == '_')) ++j;
  std::string_view kind = text.substr(i, j - i);
  bool found = false;
  for (std::size_t k = 0; k < kNames.size(); ++k) {
    if (kNames[k] == kind) {
      a.kind = static_cast<ActionKind>(k);
      found = true;
      break;
    }
  }
  if (!found) return fail("unknown kind " + Quoted(kind));
  std::string_view rest = text.substr(j);
  if (HasMicrobatch(a.kind)) {
    if (rest.empty()) return fail("a microbatch number must follow the kind");
    if (!ParseInt(rest, &a.microbatch)) return fail("bad microbatch number");
  } else if (!rest.empty()) {
    return fail(std::string(kind) + " takes no microbatch");
  }
  return a;
}

}  // namespace pipetwin

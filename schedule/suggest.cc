#include "schedule/suggest.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

#include "schedule/quote.h"

namespace pipetwin {
namespace {

// Longer words are not guessed at (and the table below stays small whatever a file holds).
constexpr std::size_t kMaxWord = 64;
constexpr std::size_t kMaxShown = 3;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Edits between a and b: insertions, deletions, replacements and swaps of two neighbours
// (the optimal string alignment distance).
std::size_t Edits(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::size_t EditsAllowed(std::size_t name_length) {
  if (name_length <= 7) return 1;
  return name_length <= 11 ? 2 : 3;
}

}  // namespace

std::vector<std::string> ClosestNames(std::string_view word,
                                      const std::vector<std::string>& names) {
  if (word.empty() || word.size() > kMaxWord) return {};
  const std::string w = Lower(word);
  // Score: the edits, or (past every edit score) a prefix match.
  constexpr std::size_t kPrefix = kMaxWord + 1;
  std::vector<std::pair<std::size_t, std::size_t>> close;  // (score, index in names)
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].size() > kMaxWord || names[i] == word) continue;
    const std::string n = Lower(names[i]);
    const std::size_t e = Edits(w, n);
    if (e <= EditsAllowed(n.size())) {
      close.emplace_back(e, i);
    } else if (w.size() >= 4 && n.size() > w.size() && n.compare(0, w.size(), w) == 0) {
      close.emplace_back(kPrefix, i);
    }
  }
  if (close.empty()) return {};
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::size_t best = close.front().first;
  std::vector<std::string> out;
  for (const auto& [score, i] : close) {
    if (score == best) out.push_back(names[i]);
  }
  if (out.size() > kMaxShown) return {};
  return out;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& names,
                       std::string_view prefix) {
  const std::vector<std::string> close = ClosestNames(word, names);
  if (close.empty()) return "";
  std::string out = "did you mean ";
  for (std::size_t i = 0; i < close.size(); ++i) {
    if (i > 0) out += i + 1 == close.size() ? " or " : ", ";
    out += Quoted(std::string(prefix) + close[i]);
  }
  return out + "?";
}

}  // namespace pipetwin

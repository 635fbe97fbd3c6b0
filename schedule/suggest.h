// suggest.h — "did you mean": the allowed names closest to a mistyped one, for the messages
// that refuse it (an unknown key, a choice, a preset, a device, a command-line option).
//
// A name is close when, ignoring case, one edit turns the word into it for names of up to 7
// characters, two edits up to 11 and three beyond (an edit: a character inserted, deleted,
// replaced, or two neighbours swapped), or when the word (4 characters or more) begins it.
// The nearest names are offered, at most three, in the order given; none when more than
// three are equally near (`gpt3` begins nine presets: no guess is better than a list).
//
//   DidYouMean("micro_bach", {"global_batch", "micro_batch"})  // "did you mean 'micro_batch'?"
//   DidYouMean("zb-h3", {"zb-h1", "zb-h2"})           // "did you mean 'zb-h1' or 'zb-h2'?"
//   DidYouMean("bogus", {"pp", "dp"})                 // ""
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipetwin {

// The close names (see above), nearest first; empty when there are none or too many.
std::vector<std::string> ClosestNames(std::string_view word, const std::vector<std::string>& names);

// "did you mean 'a'?", "did you mean 'a' or 'b'?", "did you mean 'a', 'b' or 'c'?", or "".
// `prefix` goes before each name (`--` for options).
std::string DidYouMean(std::string_view word, const std::vector<std::string>& names,
                       std::string_view prefix = "");

}  // namespace pipetwin

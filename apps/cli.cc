#include "apps/cli.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "schedule/file_io.h"
#include "schedule/suggest.h"

namespace pipetwin {

po::typed_value<std::string>* Text() { return po::value<std::string>(); }

bool Args::Has(const char* option) const {
  auto it = vm.find(option);
  if (it == vm.end() || it->second.empty()) return false;
  if (const bool* b = boost::any_cast<bool>(&it->second.value())) return *b;
  return true;
}

std::string Args::Get(const char* option, const std::string& fallback) const {
  auto it = vm.find(option);
  if (it == vm.end() || it->second.empty()) return fallback;
  return it->second.as<std::string>();
}

namespace {

bool HasPercent(const std::vector<std::string>& words) {
  return std::any_of(words.begin(), words.end(),
                     [](const std::string& w) { return w.find('%') != std::string::npos; });
}

// "-x", "--name": an option; "-", "-0.5" and "-3" are values.
bool LooksLikeOption(const std::string& v) {
  if (v.size() < 2 || v[0] != '-') return false;
  const char c = v[1];
  return c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Parses `words` into `vm`, or says what is wrong with them. Boost's messages substitute the
// user's words into a template (error_with_option_name::substitute_placeholders) and loop
// forever on a word that holds a placeholder such as %value%: where a word holds a '%', the
// message is made from the words with each '%' shown as '?' (the same error: '%' means
// nothing to the parser).
std::optional<std::string> Parse(const std::vector<std::string>& words,
                                 const po::options_description& all,
                                 const po::positional_options_description& pos, int style,
                                 po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(words).options(all).positional(pos).style(style).run(), vm);
    po::notify(vm);
    return std::nullopt;
  } catch (const po::unknown_option& e) {
    // The option as written ("--reprot"), and the long names it may have meant.
    const std::string written = e.get_option_name();
    std::vector<std::string> names;
    for (const auto& o : all.options()) {
      if (!o->long_name().empty() && o->long_name() != "positional")
        names.push_back(o->long_name());
    }
    const std::string bare =
        written.substr(std::min(written.find_first_not_of('-'), written.size()));
    const std::string guess = DidYouMean(bare, names, "--");
    return "unknown option " + written + (guess.empty() ? "" : ", " + guess);
  } catch (const po::invalid_command_line_syntax& e) {
    if (e.kind() == po::invalid_syntax::missing_parameter) {
      return "option " + e.get_option_name() + " needs a value";
    }
    if (!HasPercent(words)) return e.what();
  } catch (const po::error& e) {
    if (!HasPercent(words)) return e.what();
  }
  std::vector<std::string> shown = words;
  for (std::string& w : shown) std::replace(w.begin(), w.end(), '%', '?');
  po::variables_map scratch;
  if (std::optional<std::string> bad = Parse(shown, all, pos, style, scratch)) {
    return *bad + " ('%' shown as '?')";
  }
  return "the command line cannot be read";
}

}  // namespace

Expected<Args> ParseArgs(int argc, char** argv, const CommandSpec& spec,
                         const po::options_description& options) {
  po::options_description help_option;
  help_option.add_options()("help,h", po::bool_switch(), "print this help and exit");
  po::options_description hidden;
  hidden.add_options()("positional", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(help_option).add(hidden);
  po::positional_options_description pos;
  pos.add("positional", -1);
  // No abbreviations: `--asci` is a typo, not `--ascii`.
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  const std::string see = " (see pipetwin " + std::string(spec.name) + " --help)";
  Args a;
  const std::vector<std::string> words(argv + std::min(argc, 2), argv + argc);
  if (std::optional<std::string> bad = Parse(words, all, pos, style, a.vm)) {
    return Error::BadInput(std::string(spec.name) + ": " + *bad + see);
  }
  // `--report --ascii`: a value that looks like an option is a forgotten value, not a file name.
  for (const auto& [name, value] : a.vm) {
    if (name == "positional" || value.empty()) continue;
    const auto* text = boost::any_cast<std::string>(&value.value());
    if (text != nullptr && LooksLikeOption(*text)) {
      return Error::BadInput(std::string(spec.name) + ": option --" + name +
                             " needs a value, got the option-like '" + *text +
                             "' (for a file of that name write ./" + *text + ")" + see);
    }
  }
  if (a.vm.count("positional") > 0) {
    a.positional = a.vm["positional"].as<std::vector<std::string>>();
  }
  if (a.vm["help"].as<bool>()) {
    std::cout << "usage: " << spec.synopsis << "\n\n" << spec.description << "\n\n";
    if (!options.options().empty()) std::cout << options << "\n";
    std::cout << help_option;
    a.help = true;
    return a;
  }
  const int n = static_cast<int>(a.positional.size());
  if (n < spec.min_positional || (spec.max_positional >= 0 && n > spec.max_positional)) {
    return Error::BadInput(std::string(spec.name) + ": expected " + spec.positional + ", got " +
                           std::to_string(n) + " argument" + (n == 1 ? "" : "s") + see);
  }
  return a;
}

Status CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::string>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [option, path] = outputs[i];
    if (path.empty()) continue;
    if (Status s = CheckOutputPath(path, option); !s) return s;
    for (const std::string& in : inputs) {
      if (!in.empty() && SamePath(path, in)) {
        return Error::BadInput(option + ": " + path + " is an input of this command (" + in +
                               "); an output must be a different file");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].second.empty() && SamePath(path, outputs[j].second)) {
        return Error::BadInput(option + ": " + path + " is also the output of " + outputs[j].first +
                               "; every output needs its own file");
      }
    }
  }
  return OkStatus();
}

Status CheckOutputFolder(const std::string& option, const std::string& dir,
                         const std::vector<std::pair<std::string, std::string>>& files,
                         const std::vector<std::string>& inputs) {
  if (Status s = CheckOutputDir(dir, option); !s) return s;
  // SamePath for every file against every input, with each input resolved once: an existing
  // file is an input if it is the same inode; one not yet there if its path, the folder's
  // resolved path and its name, is an input's (plan --top N --emit-jobs checks N names).
  namespace fs = std::filesystem;
  struct Input {
    const std::string* path;
    bool exists;
    struct stat st;
    fs::path canonical;
  };
  std::vector<Input> resolved;
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    Input r{&in, false, {}, {}};
    r.exists = ::stat(in.c_str(), &r.st) == 0;
    std::error_code ec;
    r.canonical = fs::weakly_canonical(fs::absolute(in, ec), ec);
    if (ec) r.canonical.clear();
    resolved.push_back(std::move(r));
  }
  std::error_code dir_ec;
  const fs::path dir_canonical = fs::weakly_canonical(fs::absolute(dir, dir_ec), dir_ec);
  for (const auto& [name, source] : files) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
      return Error::BadInput(option + ": " + path + " is a directory; this command writes a " +
                             "file of that name");
    }
    for (const Input& in : resolved) {
      const bool same = exists ? in.exists && st.st_dev == in.st.st_dev && st.st_ino == in.st.st_ino
                               : !in.exists && (dir_ec || in.canonical.empty()
                                                    ? path == *in.path
                                                    : dir_canonical / name == in.canonical);
      if (!same) continue;
      if (!source.empty() && SamePath(source, *in.path)) continue;  // its own copy: left as it is
      return Error::BadInput(option + ": " + path + ", which this command writes, is its input " +
                             *in.path + "; choose another folder");
    }
  }
  return OkStatus();
}

int Fail(const Error& e) {
  std::cerr << "pipetwin: " << e.message << "\n";
  return e.exit_status();
}

}  // namespace pipetwin

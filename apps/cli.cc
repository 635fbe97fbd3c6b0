#include "apps/cli.h"

#include <iostream>

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
  try {
    const std::vector<std::string> words(argv + std::min(argc, 2), argv + argc);
    po::store(po::command_line_parser(words).options(all).positional(pos).style(style).run(), a.vm);
    po::notify(a.vm);
  } catch (const po::unknown_option& e) {
    return Error::BadInput(std::string(spec.name) + ": unknown option " + e.get_option_name() +
                           see);
  } catch (const po::invalid_command_line_syntax& e) {
    if (e.kind() == po::invalid_syntax::missing_parameter) {
      return Error::BadInput(std::string(spec.name) + ": option " + e.get_option_name() +
                             " needs a value" + see);
    }
    return Error::BadInput(std::string(spec.name) + ": " + e.what() + see);
  } catch (const po::error& e) {
    return Error::BadInput(std::string(spec.name) + ": " + e.what() + see);
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

int Fail(const Error& e) {
  std::cerr << "pipetwin: " << e.message << "\n";
  return e.exit_status();
}

}  // namespace pipetwin

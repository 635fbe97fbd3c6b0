// cli.h — the command line's one parser (Boost.Program_options), shared by every subcommand:
// options and positional arguments checked the same way, `SUBCOMMAND --help`, and errors
// (exit status 2) that name the option.
//
//   po::options_description o("options");
//   o.add_options()("report", Text(), "write the report (JSON)");
//   Expected<Args> a = ParseArgs(argc, argv, kSimulateSpec, o);
//   if (!a) return Fail(a.error());
//   if (a->help) return 0;   // the help was printed
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <utility>
#include <vector>

#include "schedule/expected.h"

namespace pipetwin {

namespace po = boost::program_options;

// What a subcommand takes besides its options.
struct CommandSpec {
  const char* name;         // "simulate"
  const char* synopsis;     // "pipetwin simulate JOB.yaml [options]"
  const char* description;  // what it does, for --help
  const char* positional;   // "exactly one job file", for the message when the count is wrong
  int min_positional = 0;
  int max_positional = 0;  // -1: any number
};

struct Args {
  po::variables_map vm;
  std::vector<std::string> positional;
  bool help = false;  // --help was given and printed; nothing else was checked

  bool Has(const char* option) const;  // given (a flag that is set, or a value)
  std::string Get(const char* option, const std::string& fallback = "") const;
};

// An option that takes a value, read with Args::Get. (Every such value is made here: GCC 12
// reports a false -Wnull-dereference in Boost's typed_value<std::string>, which this one
// file is compiled without; see apps/CMakeLists.txt.)
po::typed_value<std::string>* Text();

// argv[2..] (argv[1] is the subcommand). `--help` prints the subcommand's help on stdout.
Expected<Args> ParseArgs(int argc, char** argv, const CommandSpec& spec,
                         const po::options_description& options);

// Checks every output before any work: each path's directory exists and is writable, and no
// output is an input (the job file, a profile) or another output. `outputs` holds
// {option, path} pairs ("--report", "r.json"); empty paths (option not given) are skipped.
Status CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::string>& inputs);

// Checks an output folder before any work: `dir` can be written or created (CheckOutputDir),
// and no file the command writes in it is an input. `files` holds {name in dir, source}: the
// source is the input that file is a copy of (it may be that input itself), or empty.
Status CheckOutputFolder(const std::string& option, const std::string& dir,
                         const std::vector<std::pair<std::string, std::string>>& files,
                         const std::vector<std::string>& inputs);

// Prints "pipetwin: MESSAGE" on stderr; returns the error's exit status.
int Fail(const Error& e);

}  // namespace pipetwin

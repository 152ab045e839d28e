// nn_train's command line and `--config FILE` parser (options.cpp, config_file.cpp): CLI11 for the syntax,
// one strict converter per option for both sources, so both reject the same values.
// Tested by tests/app/test_options.cpp (no MPI needed: parsing is rank-local).
#pragma once
#include <string>
#include <vector>

#include "train/config.h"

namespace nn::app {

using train::Config;

struct ParseResult {
  Config config;
  bool help = false;      // --help/-h was given: print help_text on rank 0 and exit 0
  std::string help_text;  // filled only when help is true
};

// Parses argv (argv[0] is the program name) and, with --config, the file it names;
// options on the command line override the file. Throws nn::UserError with one line
// (no "error: " prefix) for anything invalid. Uses no MPI and reads no file but the
// --config one, so every rank reaches the same verdict from the same inputs.
ParseResult parse_config(int argc, const char* const* argv);
// The same, from the arguments after the program name (for tests).
ParseResult parse_config(const std::vector<std::string>& args);

// The --help text (every option with its default).
std::string help_text();

}  // namespace nn::app

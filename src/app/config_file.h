// The `--config FILE` syntax: `key = value` per line; blank lines and `#` comments (a whole
// line, or after whitespace following a value); a value may be "double quoted" to keep a `#`;
// a UTF-8 BOM is skipped; at most 1 MiB. What the keys mean is options.cpp's business.
// Tested by tests/app/test_options.cpp.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nn::app {

struct ConfigLine {
  std::string key, value;
  int line;
};

// Reads and splits the file. check_key(key, where) is called for each key in file order
// (where = "FILE:LINE: ") and throws for an unknown one, so the first problem in the file is
// the one reported. Throws nn::UserError with one line.
std::vector<ConfigLine> read_config_file(
    const std::string& path, const std::function<void(const std::string&, const std::string&)>& check_key);

// Without the blanks (space, tab, CR, LF, FF, VT) at both ends.
std::string trim(std::string_view s);

}  // namespace nn::app

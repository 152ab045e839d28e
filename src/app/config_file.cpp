// The --config file reader (config_file.h).
#include "app/config_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "common/errors.h"

namespace nn::app {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n\f\v");
  return std::string(s.substr(b, e - b + 1));
}

namespace {

// The whole file (at most 1 MiB), without a leading UTF-8 BOM.
std::string read_text(const std::string& path) {
  const std::string where = "--config " + path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(where + ": is a directory");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw UserError(where + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > (1u << 20)) {
      std::fclose(f);
      throw UserError(where + ": larger than 1 MiB; not a config file");
    }
  }
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) throw UserError(where + ": cannot read");
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 BOM from some editors
  return text;
}

// A value without its quotes, or without a trailing comment.
std::string unquoted(std::string value, const std::string& line, const std::string& at) {
  if (!value.empty() && value[0] == '"') {
    const auto close = value.find('"', 1);
    const std::string rest = close == std::string::npos ? "" : trim(value.substr(close + 1));
    if (close == std::string::npos || !(rest.empty() || rest[0] == '#'))
      throw UserError(at + "malformed quoted value in `" + line + "`");
    return value.substr(1, close - 1);
  }
  for (std::size_t i = 1; i < value.size(); ++i)
    if (value[i] == '#' && (value[i - 1] == ' ' || value[i - 1] == '\t')) return trim(value.substr(0, i));
  return value;
}

// One line as key and value; nothing for a blank or comment line.
std::optional<std::pair<std::string, std::string>> split_line(const std::string& raw_line, const std::string& at) {
  const std::string line = trim(raw_line);
  if (line.empty() || line[0] == '#') return std::nullopt;
  if (line.find('\0') != std::string::npos) throw UserError(at + "contains a NUL byte");
  const auto eq = line.find('=');
  if (eq == std::string::npos) throw UserError(at + "expected `key = value`, got `" + line + "`");
  std::string key = trim(std::string_view(line).substr(0, eq));
  if (key.empty()) throw UserError(at + "expected `key = value`, got `" + line + "`");
  return std::make_pair(std::move(key), unquoted(trim(std::string_view(line).substr(eq + 1)), line, at));
}

}  // namespace

std::vector<ConfigLine> read_config_file(
    const std::string& path, const std::function<void(const std::string&, const std::string&)>& check_key) {
  const std::string text = read_text(path);
  std::vector<ConfigLine> items;
  std::map<std::string, int> seen;  // key -> line it was first set on
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string raw_line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    const std::string at = path + ":" + std::to_string(line_no) + ": ";
    auto kv = split_line(raw_line, at);
    if (!kv) continue;
    check_key(kv->first, at);
    if (const auto [it, fresh] = seen.emplace(kv->first, line_no); !fresh)
      throw UserError(at + "duplicate key `" + kv->first + "` (first set on line " + std::to_string(it->second) +
                      ")");
    items.push_back({std::move(kv->first), std::move(kv->second), line_no});
  }
  return items;
}

}  // namespace nn::app

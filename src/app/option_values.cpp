// The option value converters (option_values.h).
#include "app/option_values.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

#include "app/config_file.h"  // trim

namespace nn::app::option_values {

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

// Integers are plain decimal ("1e3" and "0x10" are refused; CLI11 would take both). They
// are parsed as signed 64-bit before the range check, so "-5" for a size_t option is
// "negative", never 2^64 - 5.
long long to_int(const std::string& text, long long lo, long long hi) {
  const std::string s = trim(text);
  if (s.empty()) throw BadValue{"missing value"};
  std::string_view digits = s;
  if (digits[0] == '+' || digits[0] == '-') digits.remove_prefix(1);
  if (!all_digits(digits)) throw BadValue{"not an integer"};
  const auto below = [&] {
    return BadValue{lo == 0 ? "must not be negative" : "must be at least " + std::to_string(lo)};
  };
  const auto above = [&] { return BadValue{"must be at most " + std::to_string(hi)}; };
  long long v = 0;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) throw s[0] == '-' ? below() : above();
  if (ec != std::errc() || end != s.data() + s.size()) throw BadValue{"not an integer"};
  if (v < lo) throw below();
  if (v > hi) throw above();
  return v;
}

std::uint64_t to_u64(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) throw BadValue{"missing value"};
  if (s[0] == '-' && all_digits(std::string_view(s).substr(1)))
    throw BadValue{"must not be negative"};
  const std::string_view digits = std::string_view(s).substr(s[0] == '+' ? 1 : 0);
  if (!all_digits(digits)) throw BadValue{"not an integer"};
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw BadValue{"must be at most " + std::to_string(std::numeric_limits<std::uint64_t>::max())};
  if (ec != std::errc() || end != digits.data() + digits.size()) throw BadValue{"not an integer"};
  return v;
}

// Finite decimal numbers only: "nan", "inf" and overflowing exponents are refused.
double to_double(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) throw BadValue{"missing value"};
  // from_chars takes no '+'; strip one, but not one in front of another sign.
  const char* first = s.data();
  if (*first == '+' && s.size() > 1 && s[1] != '-' && s[1] != '+') ++first;
  double v = 0;
  const auto [end, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) throw BadValue{"out of range"};
  if (ec != std::errc() || end != s.data() + s.size()) throw BadValue{"not a number"};
  if (!std::isfinite(v)) throw BadValue{"not a finite number"};
  return v;
}
double to_double(const std::string& text, double lo, double hi) {
  const double v = to_double(text);
  if (v < lo || v > hi) throw BadValue{"must be between " + shown(lo) + " and " + shown(hi)};
  return v;
}

// Flags in a config file: `no-shuffle = true`. (On the command line they take no value.)
bool to_bool(const std::string& text) {
  std::string s = trim(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "true" || s == "yes" || s == "on" || s == "1") return true;
  if (s == "false" || s == "no" || s == "off" || s == "0") return false;
  throw BadValue{s.empty() ? "missing value" : "not a boolean (true/false, yes/no, on/off, 1/0)"};
}

// Paths: CLI11 takes the next argument as the value even when it is an option, so
// `--save --verify` would silently save to a file named "--verify"; refuse that.
std::string to_path(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty()) throw BadValue{"missing value"};
  if (s[0] == '-')
    throw BadValue{"looks like an option, not a path (write ./" + s + " for such a file)"};
  return s;
}

std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string or_none(const std::string& s) { return s.empty() ? "none" : s; }

int to_int32(const std::string& v, long long lo, long long hi) {
  return static_cast<int>(to_int(v, lo, hi));
}
std::size_t to_size(const std::string& v, long long lo, long long hi) {
  return static_cast<std::size_t>(to_int(v, lo, hi));
}

}  // namespace nn::app::option_values

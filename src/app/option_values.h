// Option values from text: the strict converters behind every option of nn_train (options.cpp),
// shared by the command line and the --config file. A rejected value throws BadValue with only
// the problem; the caller says where the value came from. Tested through tests/app/test_options.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nn::app::option_values {

// A rejected value: only the problem; the caller says where the value came from
// ("--hidden 0: ..." or "run.cfg:3: hidden = 0: ...").
struct BadValue {
  std::string problem;
};

// Limits beyond the type: H is capped far above useful sizes so that H*784 and the
// checkpoint stay small enough to reason about; B at 2^30 as the trainer does; everything
// else only has to fit an int (the GEMM takes int sizes). The data-dependent limits
// (batch <= training images) are the trainer's.
inline constexpr long long kMaxHidden = 65536;
inline constexpr long long kMaxBatch = 1LL << 30;
inline constexpr long long kIntMax = 2147483647;

// Integers are plain decimal ("1e3" and "0x10" are refused; CLI11 would take both), parsed as
// signed 64-bit before the range check, so "-5" for a size_t option is "negative".
long long to_int(const std::string& text, long long lo, long long hi);
int to_int32(const std::string& v, long long lo, long long hi);
std::size_t to_size(const std::string& v, long long lo, long long hi = kIntMax);
std::uint64_t to_u64(const std::string& text);
// Finite decimal numbers only: "nan", "inf" and overflowing exponents are refused.
double to_double(const std::string& text);
double to_double(const std::string& text, double lo, double hi);  // and within [lo, hi]
// Flags in a config file: `no-shuffle = true`. (On the command line they take no value.)
bool to_bool(const std::string& text);
// Paths: an option-looking value ("--verify" after --save) is refused.
std::string to_path(const std::string& text);
std::string shown(double v);              // %g
std::string or_none(const std::string& s);  // "none" for ""

}  // namespace nn::app::option_values

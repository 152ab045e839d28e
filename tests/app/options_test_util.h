// Shared by the option tests, tests/app/test_options*.cpp: the ConfigFile fixture (config files in
// a fresh directory per test), error_of() and EXPECT_REJECTED (a refused parse and its one-line
// message).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../temp_dir.h"
#include "common/errors.h"
#include "gemm/gemm.h"
#include "app/options.h"

namespace {

namespace fs = std::filesystem;
using nn::train::Config;
using nn::app::parse_config;
using Args = std::vector<std::string>;

}  // namespace

// One class for every file (gtest requires one fixture per suite), so not in an anonymous
// namespace. A fresh directory per test (mkdtemp names are unique across ranks), removed afterwards.
class ConfigFile : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    dir_ = tmp_.str();
  }
  std::string write(const std::string& text, const std::string& name = "run.cfg") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  nn::test::TempDir tmp_{"nn_cfg"};
  std::filesystem::path dir_;
};

namespace {

// The UserError's message, or "" when the parse succeeds (fails the test then).
inline std::string error_of(const Args& args) {
  try {
    parse_config(args);
  } catch (const nn::UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << testing::PrintToString(args);
  return "";
}

}  // namespace

#define EXPECT_REJECTED(args, phrase)                                          \
  do {                                                                         \
    const std::string msg_ = error_of(args);                                   \
    EXPECT_NE(msg_.find(phrase), std::string::npos) << "message: " << msg_;    \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << "not one line: " << msg_; \
  } while (0)


// GoogleTest suite for src/app/options.cpp: defaults, every option, one test per class of
// invalid value (each with its message), the --config file (syntax, errors, override order).
// Rank-local (no MPI); config files go to a fresh mkdtemp directory per test.
// --report/--profile, --fused and the graph switches: test_options_report.cpp.
#include "options_test_util.h"

namespace {

TEST(Config, DefaultsWithoutArguments) {
  const auto r = parse_config(Args{});
  EXPECT_FALSE(r.help);
  const Config& c = r.config;
  const Config d;
  EXPECT_EQ(c.data, "data/current");
  EXPECT_EQ(c.hidden, 256);
  EXPECT_EQ(c.batch, 100u);
  EXPECT_EQ(c.epochs, 10);
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_EQ(c.reg, 1e-4);
  EXPECT_EQ(c.train_size, 0u);
  EXPECT_EQ(c.test_size, 0u);
  EXPECT_EQ(c.val_fraction, 0.1);
  EXPECT_EQ(c.seed, 1u);
  EXPECT_TRUE(c.shuffle);
  EXPECT_EQ(c.gemm, d.gemm);
  EXPECT_EQ(c.save, "");
  EXPECT_EQ(c.load, "");
  EXPECT_FALSE(c.verify);
  EXPECT_EQ(c.metrics, "");
  EXPECT_EQ(c.print_every, 0);
  EXPECT_EQ(c.config_file, "");
}

TEST(Config, EveryOptionParsed) {
  // clang-format off
  const auto r = parse_config(Args{
      "--data", "/d", "--hidden", "64", "--batch", "3000", "--epochs", "3", "--lr", "0.25",
      "--reg", "1e-3", "--train-size", "6000", "--test-size", "1000", "--val-fraction", "0",
      "--seed", "18446744073709551615", "--no-shuffle", "--gemm", "2", "--save", "out/ck.bin",
      "--load", "in.bin", "--verify", "--metrics", "m.csv", "--print-every", "10"});
  // clang-format on
  const Config& c = r.config;
  EXPECT_EQ(c.data, "/d");
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.batch, 3000u);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.lr, 0.25);
  EXPECT_EQ(c.reg, 1e-3);
  EXPECT_EQ(c.train_size, 6000u);
  EXPECT_EQ(c.test_size, 1000u);
  EXPECT_EQ(c.val_fraction, 0.0);
  EXPECT_EQ(c.seed, 18446744073709551615ull);
  EXPECT_FALSE(c.shuffle);
  EXPECT_EQ(c.gemm, 2);
  EXPECT_EQ(c.save, "out/ck.bin");
  EXPECT_EQ(c.load, "in.bin");
  EXPECT_TRUE(c.verify);
  EXPECT_EQ(c.metrics, "m.csv");
  EXPECT_EQ(c.print_every, 10);
}

TEST(Config, EqualsSyntaxLastOccurrenceWinsAndFlagValues) {
  const Config c = parse_config(Args{"--hidden=32", "--lr=+.5", "--hidden", "48",
                                     "--no-shuffle=false", "--verify=true"})
                       .config;
  EXPECT_EQ(c.hidden, 48);  // `make run RUN_ARGS=...` relies on the last one winning
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_TRUE(c.shuffle);
  EXPECT_TRUE(c.verify);
}

// Every variant in both builds: cuBLAS (0) is emulated on OpenBLAS in the emulator build.
TEST(Config, GemmAcceptsEveryVariant) {  // every variant of the registry (gemm/variants.h; past it: below)
  ASSERT_GE(nn::kGemmVariants, 6);
  for (int v = 0; v < nn::kGemmVariants; ++v)
    EXPECT_EQ(parse_config(Args{"--gemm", std::to_string(v)}).config.gemm, v);
  EXPECT_FALSE(parse_config(Args{"--gemm", "5"}).config.gemm_auto);
}

// --gemm auto: marked, the variant left at the default until the trainer resolves it.
TEST(Config, GemmAuto) {
  const Config c = parse_config(Args{"--gemm", "auto"}).config;
  EXPECT_TRUE(c.gemm_auto);
  EXPECT_EQ(c.gemm, 4);
  EXPECT_TRUE(parse_config(Args{}).config.gemm_auto);  // the command line's default
  EXPECT_FALSE(Config{}.gemm_auto);                     // a Config built in code keeps its variant
  EXPECT_REJECTED((Args{"--gemm", "fast"}), "--gemm fast: must be auto or a variant 0.." + std::to_string(nn::kGemmVariants - 1));
}

TEST(Config, RejectsNonNumbers) {
  EXPECT_REJECTED((Args{"--hidden", "abc"}), "--hidden abc: not an integer");
  EXPECT_REJECTED((Args{"--hidden", "1e3"}), "--hidden 1e3: not an integer");    // CLI11 takes it
  EXPECT_REJECTED((Args{"--hidden", "0x10"}), "--hidden 0x10: not an integer");  // ... and this
  EXPECT_REJECTED((Args{"--batch", "12.5"}), "--batch 12.5: not an integer");
  EXPECT_REJECTED((Args{"--test-size", "all"}), "--test-size all: not an integer");
  EXPECT_REJECTED((Args{"--seed", "+-1"}), "--seed +-1: not an integer");
  EXPECT_REJECTED((Args{"--lr", "fast"}), "--lr fast: not a number");
  EXPECT_REJECTED((Args{"--lr", "0.5x"}), "--lr 0.5x: not a number");
  EXPECT_REJECTED((Args{"--hidden", ""}), "--hidden: missing value");
}

TEST(Config, RejectsZeroAndNegativeSizes) {
  EXPECT_REJECTED((Args{"--hidden", "0"}), "--hidden 0: must be at least 1");
  EXPECT_REJECTED((Args{"--hidden", "-3"}), "--hidden -3: must be at least 1");
  EXPECT_REJECTED((Args{"--batch", "0"}), "--batch 0: must be at least 1");
  // A size_t option must not wrap "-5" to 2^64 - 5 (CLI11 alone would).
  EXPECT_REJECTED((Args{"--batch", "-5"}), "--batch -5: must be at least 1");
  EXPECT_REJECTED((Args{"--epochs", "-1"}), "--epochs -1: must not be negative");
  EXPECT_REJECTED((Args{"--train-size", "-5"}), "--train-size -5: must not be negative");
  EXPECT_REJECTED((Args{"--test-size", "-1"}), "--test-size -1: must not be negative");
  EXPECT_REJECTED((Args{"--seed", "-1"}), "--seed -1: must not be negative");
  EXPECT_REJECTED((Args{"--print-every", "-1"}), "--print-every -1: must not be negative");
  EXPECT_REJECTED((Args{"--gemm", "-1"}), "--gemm -1: must not be negative");
}

TEST(Config, RejectsOverflowingValues) {
  EXPECT_REJECTED((Args{"--hidden", "99999999999"}), "--hidden 99999999999: must be at most 65536");
  EXPECT_REJECTED((Args{"--hidden", "999999999999999999999999"}), "must be at most 65536");
  EXPECT_REJECTED((Args{"--batch", "99999999999"}),
                  "--batch 99999999999: must be at most 1073741824");
  EXPECT_REJECTED((Args{"--epochs", "2147483648"}), "must be at most 2147483647");
  EXPECT_REJECTED((Args{"--seed", "18446744073709551616"}), "must be at most 18446744073709551615");
  EXPECT_REJECTED((Args{"--lr", "1e999"}), "--lr 1e999: out of range");
  const std::string past = std::to_string(nn::kGemmVariants);  // one past the registry's last row
  EXPECT_REJECTED((Args{"--gemm", past}), "--gemm " + past + ": must be at most " + std::to_string(nn::kGemmVariants - 1));
}

TEST(Config, RejectsOutOfRangeReals) {
  EXPECT_REJECTED((Args{"--lr", "0"}), "--lr 0: must be greater than 0");
  EXPECT_REJECTED((Args{"--lr", "-0.1"}), "--lr -0.1: must be greater than 0");
  EXPECT_REJECTED((Args{"--lr", "nan"}), "--lr nan: not a finite number");
  EXPECT_REJECTED((Args{"--lr", "inf"}), "--lr inf: not a finite number");
  EXPECT_REJECTED((Args{"--reg", "-1e-4"}), "--reg -1e-4: must not be negative");
  EXPECT_REJECTED((Args{"--reg", "nan"}), "--reg nan: not a finite number");
  EXPECT_REJECTED((Args{"--val-fraction", "1"}), "--val-fraction 1: must be in [0, 1)");
  EXPECT_REJECTED((Args{"--val-fraction", "-0.1"}), "--val-fraction -0.1: must be in [0, 1)");
  EXPECT_EQ(parse_config(Args{"--reg", "0"}).config.reg, 0.0);
  EXPECT_EQ(parse_config(Args{"--val-fraction", "0.99"}).config.val_fraction, 0.99);
}

TEST(Config, RejectsStrayArgumentsAndUnknownOptions) {
  EXPECT_REJECTED((Args{"extra"}), "unexpected argument `extra`");
  EXPECT_REJECTED((Args{"--hidden", "5", "6"}), "unexpected argument `6`");
  EXPECT_REJECTED((Args{"--bogus"}), "unknown option --bogus");
  EXPECT_REJECTED((Args{"--hidden"}), "--hidden");  // value missing: CLI11's message
  EXPECT_REJECTED((Args{"--hidden"}), "see --help");
  EXPECT_REJECTED((Args{"--no-shuffle=maybe"}), "--no-shuffle");
  // CLI11 would take the option as the file name.
  EXPECT_REJECTED((Args{"--save", "--verify"}), "--save --verify: looks like an option");
  EXPECT_REJECTED((Args{"--data", "-"}), "looks like an option");
}

TEST(Config, HelpListsEveryOptionWithItsDefault) {
  const auto r = parse_config(Args{"--help"});
  ASSERT_TRUE(r.help);
  EXPECT_EQ(r.help_text, nn::app::help_text());
  for (const char* opt : {"--data DIR", "--hidden H", "--batch B", "--epochs E", "--lr X",
                          "--reg X", "--train-size N", "--test-size N", "--val-fraction F",
                          "--seed S", "--no-shuffle", "--gemm V", "--save FILE", "--load FILE",
                          "--verify", "--metrics FILE", "--print-every K", "--config FILE"}) {
    const auto at = r.help_text.find(opt);
    ASSERT_NE(at, std::string::npos) << opt;
    const std::string line = r.help_text.substr(at, r.help_text.find('\n', at) - at);
    EXPECT_NE(line.find("[default: "), std::string::npos) << line;
  }
  EXPECT_NE(r.help_text.find("--hidden H"), std::string::npos);
  EXPECT_NE(r.help_text.find("[default: 256]"), std::string::npos);
  EXPECT_NE(r.help_text.find("override"), std::string::npos);
  // Help wins over everything else on the line, as users expect.
  EXPECT_TRUE(parse_config(Args{"--hidden", "abc", "-h"}).help);
}

TEST_F(ConfigFile, EveryKeyParsed) {
  const std::string path = write(
      "# a full run\n"
      "\n"
      "data = /some dir/mnist\n"
      "hidden = 512\n"
      "batch=3000\n"
      "  epochs   =   2  \n"
      "lr = 0.1   # tuned\n"
      "reg = 0\n"
      "train-size = 6000\n"
      "test-size = 500\n"
      "val-fraction = 0.2\n"
      "seed = 42\n"
      "no-shuffle = true\n"
      "gemm = 3\n"
      "save = \"ck #1.bin\"  # quoted to keep the #\n"
      "load = start.bin\n"
      "verify = yes\n"
      "metrics = m.csv\r\n"
      "print-every = 5");  // no final newline
  const auto r = parse_config(Args{"--config", path});
  const Config& c = r.config;
  EXPECT_EQ(c.config_file, path);
  EXPECT_EQ(c.data, "/some dir/mnist");
  EXPECT_EQ(c.hidden, 512);
  EXPECT_EQ(c.batch, 3000u);
  EXPECT_EQ(c.epochs, 2);
  EXPECT_EQ(c.lr, 0.1);
  EXPECT_EQ(c.reg, 0.0);
  EXPECT_EQ(c.train_size, 6000u);
  EXPECT_EQ(c.test_size, 500u);
  EXPECT_EQ(c.val_fraction, 0.2);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_FALSE(c.shuffle);
  EXPECT_EQ(c.gemm, 3);
  EXPECT_EQ(c.save, "ck #1.bin");
  EXPECT_EQ(c.load, "start.bin");
  EXPECT_TRUE(c.verify);
  EXPECT_EQ(c.metrics, "m.csv");
  EXPECT_EQ(c.print_every, 5);
}

TEST_F(ConfigFile, CommandLineOverridesTheFileWhereverItStands) {
  const std::string path = write("hidden = 512\nlr = 0.1\nno-shuffle = true\n");
  for (const Args& args : {Args{"--config", path, "--hidden", "64", "--no-shuffle=false"},
                           Args{"--hidden", "64", "--no-shuffle=false", "--config", path}}) {
    const Config c = parse_config(args).config;
    EXPECT_EQ(c.hidden, 64);
    EXPECT_EQ(c.lr, 0.1);  // from the file
    EXPECT_TRUE(c.shuffle);
    EXPECT_EQ(c.epochs, 10);  // in neither: the default
  }
}

TEST_F(ConfigFile, BadValueNamesFileAndLineEvenWhenOverridden) {
  const std::string path = write("# comment\nepochs = 3\nhidden = 0\n");
  EXPECT_REJECTED((Args{"--config", path}), path + ":3: hidden = 0: must be at least 1");
  // A broken file is refused even if the command line sets the same option.
  EXPECT_REJECTED((Args{"--config", path, "--hidden", "5"}), path + ":3: hidden = 0");
  EXPECT_REJECTED((Args{"--config", write("batch = -5\n")}), ":1: batch = -5: must be at least 1");
  EXPECT_REJECTED((Args{"--config", write("lr = nan\n")}), ":1: lr = nan: not a finite number");
  EXPECT_REJECTED((Args{"--config", write("verify = maybe\n")}),
                  ":1: verify = maybe: not a boolean");
  EXPECT_REJECTED((Args{"--config", write("save =\n")}), ":1: save: missing value");
  EXPECT_REJECTED((Args{"--config", write("hidden = 5 6\n")}), ":1: hidden = 5 6: not an integer");
}

TEST_F(ConfigFile, SyntaxErrorsNameFileAndLine) {
  EXPECT_REJECTED((Args{"--config", write("hidden = 5\nsize = 3\n")}), ":2: unknown key `size`");
  EXPECT_REJECTED((Args{"--config", write("train_size = 3\n")}),
                  ":1: unknown key `train_size` (did you mean `train-size`?)");
  EXPECT_REJECTED((Args{"--config", write("--hidden = 3\n")}), "(did you mean `hidden`?)");
  EXPECT_REJECTED((Args{"--config", write("lr = 1\n\nhidden = 5\nlr = 2\n")}),
                  ":4: duplicate key `lr` (first set on line 1)");
  EXPECT_REJECTED((Args{"--config", write("hidden 512\n")}),
                  ":1: expected `key = value`, got `hidden 512`");
  EXPECT_REJECTED((Args{"--config", write("= 512\n")}), ":1: expected `key = value`");
  EXPECT_REJECTED((Args{"--config", write("save = \"a.bin\n")}), ":1: malformed quoted value");
  EXPECT_REJECTED((Args{"--config", write("config = other.cfg\n")}),
                  ":1: a config file cannot name another");
  EXPECT_REJECTED((Args{"--config", write(std::string("hidden = 5\0", 11) + "\n")}),
                  ":1: contains a NUL byte");
}

TEST_F(ConfigFile, UnreadableFiles) {
  const std::string missing = (dir_ / "nope.cfg").string();
  EXPECT_REJECTED((Args{"--config", missing}),
                  "--config " + missing + ": cannot open: No such file");
  EXPECT_REJECTED((Args{"--config", dir_.string()}),
                  "--config " + dir_.string() + ": is a directory");
  EXPECT_REJECTED((Args{"--config", ""}), "--config: missing value");
  // An empty file (or only comments) is valid: all defaults.
  EXPECT_EQ(parse_config(Args{"--config", write("# nothing\n")}).config.hidden, 256);
}

}  // namespace

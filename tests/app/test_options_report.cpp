// GoogleTest suite for src/app/options.cpp, the run's switches: --report FILE and --profile (command
// line, config file, bad values, help), --fused auto|on|off and the graph switches and what they
// resolve to. Rank-local (no MPI).
#include "options_test_util.h"

namespace {

// ---- --report FILE and --profile ----

TEST(Config, ReportAndProfileDefaultToOff) {
  const Config c = parse_config(Args{}).config;
  EXPECT_EQ(c.report, "");
  EXPECT_FALSE(c.profile);
}

TEST(Config, ReportAndProfileFromTheCommandLine) {
  const Config c = parse_config(Args{"--report", "out/perf.json", "--profile"}).config;
  EXPECT_EQ(c.report, "out/perf.json");
  EXPECT_TRUE(c.profile);
  EXPECT_FALSE(parse_config(Args{"--profile=false"}).config.profile);
  EXPECT_EQ(parse_config(Args{"--report=a.json", "--report", "b.json"}).config.report, "b.json");
  // --profile alone (console timing, no file) and --report alone are both valid.
  EXPECT_EQ(parse_config(Args{"--profile"}).config.report, "");
  EXPECT_FALSE(parse_config(Args{"--report", "r.json"}).config.profile);
}

TEST(Config, ReportAndProfileRejectBadValues) {
  // CLI11 would take the next option as the file name.
  EXPECT_REJECTED((Args{"--report", "--profile"}), "--report --profile: looks like an option");
  EXPECT_REJECTED((Args{"--report", ""}), "--report: missing value");
  EXPECT_REJECTED((Args{"--report"}), "--report");
  EXPECT_REJECTED((Args{"--profile=maybe"}), "--profile");
  EXPECT_REJECTED((Args{"--profile", "yes"}), "unexpected argument `yes`");  // a flag takes no value
}

TEST(Config, HelpDescribesReportAndProfile) {
  const std::string help = nn::app::help_text();
  for (const char* opt : {"--report FILE", "--profile"}) {
    const auto at = help.find(opt);
    ASSERT_NE(at, std::string::npos) << opt;
    const std::string line = help.substr(at, help.find("[default: ", at) - at);
    EXPECT_EQ(line.find("\n\n"), std::string::npos) << "no default on the option's entry: " << line;
  }
  EXPECT_NE(help.find("JSON"), std::string::npos) << help;
  EXPECT_NE(help.find("perturbs"), std::string::npos) << help;  // --profile says what it costs
}

TEST_F(ConfigFile, ReportAndProfileKeys) {
  const Config c = parse_config(Args{"--config", write("report = \"perf #1.json\"\nprofile = yes\n")}).config;
  EXPECT_EQ(c.report, "perf #1.json");
  EXPECT_TRUE(c.profile);
  // The command line overrides the file, as for every option.
  const std::string file = write("report = a.json\nprofile = true\n");
  const Config o = parse_config(Args{"--config", file, "--report", "b.json", "--profile=false"}).config;
  EXPECT_EQ(o.report, "b.json");
  EXPECT_FALSE(o.profile);
  EXPECT_REJECTED((Args{"--config", write("profile = sometimes\n")}),
                  ":1: profile = sometimes: not a boolean");
  EXPECT_REJECTED((Args{"--config", write("report =\n")}), ":1: report: missing value");
}

}  // namespace

// --fused auto|on|off and the graph switches, and what they resolve to.
TEST(Config, FusedAndGraphSwitches) {
  using nn::train::Fused;
  using nn::train::Graphs;
  const Config d = parse_config(Args{}).config;
  EXPECT_EQ(d.fused, Fused::Auto);
  EXPECT_EQ(d.graph, Graphs::Auto);
  EXPECT_TRUE(nn::train::fused_in_use(d));
  EXPECT_TRUE(nn::train::graphs_in_use(d, false));
  EXPECT_FALSE(nn::train::graphs_in_use(d, true)) << "GPGPU-Sim has no stream capture";
  EXPECT_EQ(parse_config(Args{"--fused", "off"}).config.fused, Fused::Off);
  EXPECT_EQ(parse_config(Args{"--fused=on"}).config.fused, Fused::On);
  EXPECT_REJECTED((Args{"--fused", "yes"}), "--fused yes: must be auto, on or off");
  EXPECT_EQ(parse_config(Args{"--graph"}).config.graph, Graphs::On);
  EXPECT_EQ(parse_config(Args{"--no-graph"}).config.graph, Graphs::Off);
  EXPECT_EQ(parse_config(Args{"--graph", "--no-graph"}).config.graph, Graphs::Off);
  // Off the fused step (separate kernels, another GEMM, the CPU) auto means no graphs.
  const Config off = parse_config(Args{"--fused", "off"}).config;
  EXPECT_FALSE(nn::train::fused_in_use(off));
  EXPECT_FALSE(nn::train::graphs_in_use(off, false));
  EXPECT_FALSE(nn::train::fused_in_use(parse_config(Args{"--gemm", "2"}).config));
  EXPECT_FALSE(nn::train::fused_in_use(parse_config(Args{"--strategy", "model"}).config));
  EXPECT_FALSE(nn::train::graphs_in_use(parse_config(Args{"--device", "cpu"}).config, false));
  EXPECT_TRUE(nn::train::graphs_in_use(parse_config(Args{"--graph", "--fused", "off"}).config, false));
  // GEMM variant 5 has the fused step's extras too.
  EXPECT_TRUE(nn::train::fused_in_use(parse_config(Args{"--gemm", "5"}).config));
  // The fused step gathers the batch into a normalised copy, always: no option chooses it.
  EXPECT_REJECTED((Args{"--fused-gather", "copy"}), "unknown option --fused-gather");
}

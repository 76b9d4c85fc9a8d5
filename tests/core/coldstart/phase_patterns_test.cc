#include "core/coldstart/phase_patterns.h"

#include <gtest/gtest.h>

namespace kvgate::coldstart {
namespace {

TEST(PhasePatternsTest, PresetsFollowTheSeedsTable) {
  for (std::string_view name : preset_names()) {
    Result<PatternSet> set = preset_patterns(name);
    ASSERT_TRUE(set.ok()) << name;
    std::vector<std::string> names;
    for (const auto& p : set->phases) names.push_back(p.name);
    EXPECT_EQ(names, (std::vector<std::string>{"python_imports", "engine_worker_start",
                                               "weight_load", "torch_compile", "cuda_graph_capture",
                                               "flashinfer_jit_kv_setup", "server_up"}));
  }
  EXPECT_FALSE(preset_patterns("sglang").ok());
}

TEST(PhasePatternsTest, ParsesYaml) {
  Result<PatternSet> set = parse_patterns_yaml(R"(
name: my-server
phases:
  - name: imports
    label: python imports
    end: 'server version'
  - name: weights
    end: ['Loading weights took', 'Model loading took']
)");
  ASSERT_TRUE(set.ok()) << set.error();
  EXPECT_EQ(set->name, "my-server");
  ASSERT_EQ(set->phases.size(), 2u);
  EXPECT_EQ(set->phases[0].label, "python imports");
  EXPECT_EQ(set->phases[1].label, "weights");  // defaults to the name
  EXPECT_EQ(set->phases[1].end_regexes.size(), 2u);
}

TEST(PhasePatternsTest, RejectsBadYaml) {
  EXPECT_FALSE(parse_patterns_yaml("phases: [").ok());            // not YAML
  EXPECT_FALSE(parse_patterns_yaml("- a").ok());                  // not a map
  EXPECT_FALSE(parse_patterns_yaml("name: x").ok());              // no phases
  EXPECT_FALSE(parse_patterns_yaml("phases: []").ok());           // empty
  EXPECT_FALSE(parse_patterns_yaml("phases: [{name: a}]").ok());  // no end
  EXPECT_FALSE(parse_patterns_yaml("phases: [{end: x}]").ok());   // no name
  EXPECT_FALSE(parse_patterns_yaml("phases: [{name: a, end: x}, {name: a, end: y}]").ok());
  Result<PatternSet> bad_re = parse_patterns_yaml("phases: [{name: a, end: '[z-a]'}]");
  ASSERT_FALSE(bad_re.ok());
  EXPECT_NE(bad_re.error().find("bad regex"), std::string::npos) << bad_re.error();
}

}  // namespace
}  // namespace kvgate::coldstart

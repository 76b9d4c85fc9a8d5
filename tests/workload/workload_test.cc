#include "workload/workload.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

#include "core/kv/block_hash.h"
#include "workload/mooncake_trace.h"
#include "workload/workload_yaml.h"

namespace kvgate::workload {
namespace {

WorkloadSpec small_shared_prefix() {
  WorkloadSpec w;
  w.kind = WorkloadSpec::Kind::kSharedPrefix;
  w.shared_prefix = {.groups = 3,
                     .prompts_per_group = 2,
                     .system_prompt_tokens = 64,
                     .question_tokens = 32,
                     .output_tokens = 10};
  w.arrivals.stages = {{.qps = 50, .duration_s = 2}, {.qps = 200, .duration_s = 2}};
  return w;
}

// The generator reads files only for traces, through the ReadFile it is given: these
// tests give it texts of their own.
Result<std::string> no_files(const std::string& path) { return Error("no file " + path); }

ReadFile one_file(std::string name, std::string text) {
  return [name = std::move(name), text = std::move(text)](const std::string& path) {
    return path == name ? Result<std::string>(text) : no_files(path);
  };
}

std::vector<kv::BlockKey> keys_of(const Prompt& p) {
  std::vector<kv::BlockKey> k;
  kv::hash_blocks(p, 16, 1, k);
  return k;
}

TEST(Workload, SharedPrefixSharesExactlyTheSystemPrompt) {
  auto w = make_workload(small_shared_prefix(), 1, no_files);
  ASSERT_TRUE(w.ok()) << w.error();
  std::map<std::vector<TokenId>, int> distinct;
  std::vector<WorkloadRequest> reqs;
  while (auto r = (*w)->next()) reqs.push_back(*r);
  for (const auto& r : reqs) {
    ASSERT_EQ(r.prompt->size(), 96u);
    EXPECT_EQ(r.output_tokens, 10u);
    ++distinct[*r.prompt];
  }
  EXPECT_EQ(distinct.size(), 6u);  // groups x prompts_per_group
  // Two prompts share their first 4 blocks (64 tokens) exactly when they are in the same
  // group, and never the 5th (the question).
  std::set<kv::BlockKey> first_blocks;
  for (const auto& [p, n] : distinct) {
    auto k = keys_of(p);
    ASSERT_EQ(k.size(), 6u);
    first_blocks.insert(k[3]);
  }
  EXPECT_EQ(first_blocks.size(), 3u);
  std::set<kv::BlockKey> questions;
  for (const auto& [p, n] : distinct) questions.insert(keys_of(p)[4]);
  EXPECT_EQ(questions.size(), 6u);
}

TEST(Workload, CycleSendsEveryPromptOncePerRound) {
  auto w = make_workload(small_shared_prefix(), 9, no_files);
  ASSERT_TRUE(w.ok());
  std::vector<PromptPtr> first;
  for (int i = 0; i < 12; ++i) {
    auto r = (*w)->next();
    ASSERT_TRUE(r);
    first.push_back(r->prompt);
  }
  std::set<const Prompt*> round1, round2;
  for (int i = 0; i < 6; ++i) round1.insert(first[i].get()), round2.insert(first[i + 6].get());
  EXPECT_EQ(round1.size(), 6u);
  EXPECT_EQ(round1, round2);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(first[i], first[i + 6]);
}

TEST(Workload, PoissonStagesHaveTheirRates) {
  WorkloadSpec spec = small_shared_prefix();
  spec.arrivals.stages = {{.qps = 20, .duration_s = 100}, {.qps = 80, .duration_s = 100}};
  auto w = make_workload(spec, 5, no_files);
  ASSERT_TRUE(w.ok());
  uint64_t counts[2] = {0, 0};
  Nanos last = 0;
  while (auto r = (*w)->next()) {
    EXPECT_GE(r->arrival, last);
    last = r->arrival;
    ASSERT_LT(r->stage, 2u);
    EXPECT_EQ(r->arrival < 100 * kSecond ? 0u : 1u, r->stage);
    ++counts[r->stage];
  }
  EXPECT_NEAR(counts[0], 2000, 4 * 45);  // Poisson: sd = sqrt(2000) ~ 45
  EXPECT_NEAR(counts[1], 8000, 4 * 90);
  ASSERT_EQ((*w)->stages().size(), 2u);
  EXPECT_EQ((*w)->stages()[1].start, 100 * kSecond);
}

TEST(Workload, SameSeedSameRequestsOtherSeedOthers) {
  auto collect = [](uint64_t seed) {
    auto w = make_workload(small_shared_prefix(), seed, no_files);
    std::vector<std::pair<Nanos, std::vector<TokenId>>> out;
    while (auto r = (*w)->next()) out.emplace_back(r->arrival, *r->prompt);
    return out;
  };
  EXPECT_EQ(collect(4), collect(4));
  EXPECT_NE(collect(4), collect(5));
}

TEST(Workload, DiurnalRateFollowsTheCurve) {
  WorkloadSpec spec = small_shared_prefix();
  spec.arrivals.kind = ArrivalSpec::Kind::kDiurnal;
  spec.arrivals.mean_qps = 10;
  spec.arrivals.amplitude = 0.8;
  spec.arrivals.period_s = 1000;
  spec.arrivals.duration_s = 1000;
  spec.arrivals.stage_s = 250;
  auto w = make_workload(spec, 2, no_files);
  ASSERT_TRUE(w.ok());
  std::vector<uint64_t> counts(4, 0);
  while (auto r = (*w)->next()) ++counts[r->stage];
  const auto& st = (*w)->stages();
  ASSERT_EQ(st.size(), 4u);
  // sin is positive over the first half period and negative over the second.
  EXPECT_GT(st[0].qps, 10);
  EXPECT_LT(st[2].qps, 10);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(counts[i], st[i].qps * 250, 5 * std::sqrt(st[i].qps * 250));
}

TEST(Workload, ChatTurnsExtendThePreviousPromptWithTheReply) {
  WorkloadSpec spec;
  spec.kind = WorkloadSpec::Kind::kChat;
  spec.chat = {.system_prompts = 2,
               .system_prompt_tokens = 100,
               .min_turns = 3,
               .max_turns = 3,
               .user_tokens = 20,
               .output_tokens = 30,
               .think_time_s = 1};
  spec.arrivals.stages = {{.qps = 1, .duration_s = 10}};
  auto w = make_workload(spec, 3, no_files);
  ASSERT_TRUE(w.ok());
  auto first = (*w)->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->session, 1u);
  EXPECT_EQ(first->prompt->size(), 120u);
  ASSERT_TRUE(first->reply);
  EXPECT_EQ(first->reply->size(), 30u);
  auto second = (*w)->follow_up(*first, first->arrival + kSecond);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->turn, 1u);
  EXPECT_GT(second->arrival, first->arrival + kSecond);
  ASSERT_EQ(second->prompt->size(), 120u + 30 + 20);
  EXPECT_TRUE(std::equal(first->prompt->begin(), first->prompt->end(), second->prompt->begin()));
  EXPECT_TRUE(
      std::equal(first->reply->begin(), first->reply->end(), second->prompt->begin() + 120));
  auto third = (*w)->follow_up(*second, second->arrival + kSecond);
  ASSERT_TRUE(third);
  EXPECT_FALSE((*w)->follow_up(*third, third->arrival + kSecond));  // 3 turns
}

TEST(Workload, MooncakeTraceBlocksShareByHashId) {
  const std::string trace =
      R"({"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]})"
      "\n\n"
      R"({"timestamp": 1500, "input_length": 1024, "output_length": 7, "hash_ids": [1, 2]})"
      "\n"
      R"({"timestamp": 700, "input_length": 600, "output_length": 3, "hash_ids": [9, 2]})"
      "\n";
  WorkloadSpec spec;
  spec.kind = WorkloadSpec::Kind::kTrace;
  spec.trace.path = "trace.jsonl";
  spec.trace.stage_s = 1;
  EXPECT_EQ(make_workload(spec, 1, no_files).error(), "cannot open trace trace.jsonl");
  auto w = make_workload(spec, 1, one_file("trace.jsonl", trace));
  ASSERT_TRUE(w.ok()) << w.error();
  auto a = (*w)->next(), b = (*w)->next(), c = (*w)->next();
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE((*w)->next());
  EXPECT_EQ(b->arrival, 700 * kMillisecond);  // sorted by timestamp
  EXPECT_EQ(a->prompt->size(), 1100u);
  EXPECT_EQ(c->prompt->size(), 1024u);
  EXPECT_EQ(c->output_tokens, 7u);
  EXPECT_TRUE(std::equal(c->prompt->begin(), c->prompt->end(), a->prompt->begin()));
  // Same hash id at a different position after a different parent: same content, but a
  // different chained key, as in the real trace.
  EXPECT_TRUE(
      std::equal(b->prompt->begin() + 512, b->prompt->begin() + 600, a->prompt->begin() + 512));
  EXPECT_FALSE(std::equal(b->prompt->begin(), b->prompt->begin() + 512, a->prompt->begin()));
  EXPECT_EQ((*w)->stages().size(), 2u);
}

TEST(Workload, BadTraceLineIsAnErrorNamingTheLine) {
  auto r =
      parse_trace(R"({"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]})"
                  "\n"
                  R"({"timestamp": 1, "input_length": "x"})"
                  "\n",
                  "bad.jsonl", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("bad.jsonl:2:"), std::string::npos) << r.error();
  EXPECT_FALSE(parse_trace_line("[1,2]").ok());
  EXPECT_FALSE(parse_trace_line("{").ok());
}

TEST(Workload, SharedPrefixAnswerLengthsInARange) {
  WorkloadSpec spec = small_shared_prefix();
  auto fixed = make_workload(spec, 4, no_files);
  spec.shared_prefix.output_tokens_min = 4;
  auto varied = make_workload(spec, 4, no_files);
  ASSERT_TRUE(fixed.ok() && varied.ok());
  std::set<uint32_t> lengths;
  while (auto r = (*varied)->next()) {
    auto f = (*fixed)->next();
    ASSERT_TRUE(f.has_value());
    // Same arrivals and prompts as the fixed-length run: only the lengths differ.
    EXPECT_EQ(r->arrival, f->arrival);
    EXPECT_EQ(*r->prompt, *f->prompt);
    EXPECT_EQ(f->output_tokens, 10u);
    EXPECT_GE(r->output_tokens, 4u);
    EXPECT_LE(r->output_tokens, 10u);
    lengths.insert(r->output_tokens);
  }
  EXPECT_EQ(lengths.size(), 7u);  // 4..10, all drawn in ~500 requests
  auto bad = parse_workload(YAML::Load("{kind: shared_prefix, shared_prefix: {output_tokens: 5, "
                                       "output_tokens_min: 6}, arrivals: {stages: [{qps: 1}]}}"),
                            "");
  EXPECT_FALSE(bad.ok());
}

TEST(WorkloadYaml, ParsesLlmdShapeAndRejectsTypos) {
  auto spec = parse_workload(YAML::Load(R"(
kind: shared_prefix
shared_prefix: {num_groups: 150, num_prompts_per_group: 5, system_prompt_len: 6000,
                question_len: 1200, output_len: 1000}
arrivals:
  kind: poisson
  stages:
    - {rate: 15, duration: 50, warmup: true}
    - {qps: 3, duration_s: 20}
)"),
                             "");
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ(spec->shared_prefix.groups, 150u);
  EXPECT_EQ(spec->shared_prefix.system_prompt_tokens, 6000u);
  ASSERT_EQ(spec->arrivals.stages.size(), 2u);
  EXPECT_TRUE(spec->arrivals.stages[0].warmup);
  EXPECT_EQ(spec->arrivals.stages[1].qps, 3);

  auto typo = parse_workload(YAML::Load("{kind: shared_prefix, shared_prefix: {grups: 3}, "
                                        "arrivals: {stages: [{qps: 1, duration_s: 1}]}}"),
                             "");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().find("grups"), std::string::npos);
  EXPECT_FALSE(parse_workload(YAML::Load("{kind: chat, arrivals: {stages: []}}"), "").ok());
  EXPECT_FALSE(parse_workload(YAML::Load("{kind: nope}"), "").ok());
  EXPECT_FALSE(
      parse_workload(YAML::Load("{kind: shared_prefix, arrivals: {stages: [{qps: x}]}}"), "").ok());
}

}  // namespace
}  // namespace kvgate::workload

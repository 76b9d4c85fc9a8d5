#include "gateway/data/keys.h"

#include <gtest/gtest.h>

namespace kvgate::gateway {
namespace {

TEST(Keys, Sha256MatchesTheStandardVector) {
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Keys, GeneratedKeysAreRandomAndWellFormed) {
  auto a = generate_key(), b = generate_key();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->size(), 4u + 48u);
  EXPECT_TRUE(a->starts_with("kvg-"));
  EXPECT_NE(*a, *b);
}

TEST(Keys, AuthenticatesByHashOnly) {
  std::string yaml = "keys:\n  - sha256: " + to_hex(sha256("kvg-secret-one")) +
                     "\n    tenant: acme\n    models: [m1]\n    priority: -1\n"
                     "  - sha256: " +
                     to_hex(sha256("kvg-secret-two")) +
                     "\n    tenant: beta\n    may_set_priority: true\n"
                     "    limits: {tokens_per_minute: 1000}\n";
  auto store = KeyStore::parse(yaml, "keys.yaml");
  ASSERT_TRUE(store) << store.error();
  EXPECT_EQ(store->size(), 2u);
  const Tenant* t = store->authenticate_header("Bearer kvg-secret-one");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "acme");
  EXPECT_EQ(t->priority, -1);
  EXPECT_TRUE(t->allows("m1"));
  EXPECT_FALSE(t->allows("m2"));
  const Tenant* u = store->authenticate_header("bearer   kvg-secret-two ");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->name, "beta");
  EXPECT_TRUE(u->allows("anything"));
  EXPECT_EQ(u->limits.tokens_per_minute, 1000u);
  EXPECT_EQ(store->authenticate_header("Bearer kvg-secret-three"), nullptr);
  EXPECT_EQ(store->authenticate_header("Basic kvg-secret-one"), nullptr);
  EXPECT_EQ(store->authenticate_header("Bearer "), nullptr);
  EXPECT_EQ(store->authenticate_header(""), nullptr);
  EXPECT_EQ(store->authenticate(to_hex(sha256("kvg-secret-one"))), nullptr);
}

TEST(Keys, PerModelLimitsAndWeights) {
  std::string yaml = "keys:\n  - sha256: " + to_hex(sha256("k")) +
                     "\n    tenant: acme\n    limits:\n      tokens_per_minute: 1000\n"
                     "      prompt_weight: 0.5\n      models:\n"
                     "        qwen3: {tokens_per_minute: 200, requests_per_minute: 5}\n";
  auto store = KeyStore::parse(yaml, "keys.yaml");
  ASSERT_TRUE(store) << store.error();
  const Tenant* t = store->authenticate("k");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->limits.prompt_weight, 0.5);
  EXPECT_EQ(t->limits.completion_weight, 1.0);
  ASSERT_EQ(t->limits.models.size(), 1u);
  EXPECT_EQ(t->limits.models[0].model, "qwen3");
  EXPECT_EQ(t->limits.models[0].tokens_per_minute, 200u);
  EXPECT_EQ(t->limits.models[0].requests_per_minute, 5u);

  auto bad = KeyStore::parse("keys:\n  - sha256: " + to_hex(sha256("k")) +
                                 "\n    tenant: acme\n    limits:\n      models:\n"
                                 "        qwen3: {tokens_per_min: 1}\n",
                             "keys.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("keys.yaml:6:"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("limits.models.qwen3.tokens_per_min: unknown field"),
            std::string::npos)
      << bad.error();
}

TEST(Keys, LatencyTargetDefaults) {
  std::string yaml = "keys:\n  - sha256: " + to_hex(sha256("k")) +
                     "\n    tenant: acme\n    ttft_ms: 500\n    tpot_ms: 40\n"
                     "  - sha256: " +
                     to_hex(sha256("j")) + "\n    tenant: beta\n";
  auto store = KeyStore::parse(yaml, "keys.yaml");
  ASSERT_TRUE(store) << store.error();
  const Tenant* t = store->authenticate("k");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ttft_ms, 500);
  EXPECT_EQ(t->tpot_ms, 40);
  const Tenant* u = store->authenticate("j");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->ttft_ms, 0);  // none
  EXPECT_EQ(u->tpot_ms, 0);
  auto bad = KeyStore::parse(
      "keys:\n  - sha256: " + to_hex(sha256("k")) + "\n    tenant: acme\n    tpot_ms: -3\n",
      "keys.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("keys.yaml:4:"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("keys[0].tpot_ms"), std::string::npos) << bad.error();
}

TEST(Keys, BadFilesAreErrorsWithLocation) {
  auto bad = KeyStore::parse("keys:\n  - sha256: 12\n    tenant: x\n", "k.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "k.yaml:2:13: keys[0].sha256: expected 64 hex digits");
  auto unknown = KeyStore::parse("keys:\n  - key: abc\n", "k.yaml");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(), "k.yaml:2:5: keys[0].key: unknown field");
  auto empty = KeyStore::parse("", "k.yaml");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->size(), 0u);
}

}  // namespace
}  // namespace kvgate::gateway

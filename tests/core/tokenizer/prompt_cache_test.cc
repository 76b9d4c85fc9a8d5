#include "core/tokenizer/prompt_cache.h"

#include <gtest/gtest.h>

#include "core/tokenizer/chat_template.h"
#include "fixtures.h"

namespace kvgate::tokenizer {
namespace {

// A ChatML conversation of `turns` user/assistant pairs, as Qwen3's template renders it.
std::string chatml(int turns, int variant = 0) {
  std::string s = "<|im_start|>system\nYou are helpful.<|im_end|>\n";
  for (int i = 0; i < turns; ++i) {
    s += "<|im_start|>user\nQuestion " + std::to_string(i) + " about naïve 東京 " +
         std::to_string(variant) + "?  <|im_end|>\n";
    s += "<|im_start|>assistant\nAnswer   " + std::to_string(i * 7) + " 🎉\n\n<|im_end|>\n";
  }
  return s + "<|im_start|>assistant\n";
}

TEST(PromptCache, TurnByTurnEqualsFromScratchAndReuses) {
  KVGATE_REQUIRE_FIXTURE(tok, "qwen3");
  PromptCache cache(1 << 20);
  std::vector<uint32_t> ids;
  for (int turn = 1; turn <= 30; ++turn) {
    const std::string text = chatml(turn);
    PromptCache::Stats stats;
    ASSERT_TRUE(cache.encode(*tok, text, ids, &stats).ok());
    ASSERT_EQ(ids, *tok->encode(text)) << "turn " << turn;
    if (turn > 1) {
      EXPECT_GT(stats.reused_bytes, chatml(turn - 1).size() - 40) << "turn " << turn;
      EXPECT_GT(stats.reused_ids, 0u);
    }
  }
  // The same conversation again is served entirely up to its last added token.
  PromptCache::Stats stats;
  ASSERT_TRUE(cache.encode(*tok, chatml(30), ids, &stats).ok());
  EXPECT_EQ(stats.reused_bytes, chatml(30).size() - std::string("assistant\n").size());
}

TEST(PromptCache, DifferentHistoriesDoNotMix) {
  KVGATE_REQUIRE_FIXTURE(tok, "qwen3");
  PromptCache cache(1 << 20);
  std::vector<uint32_t> ids;
  for (int v = 0; v < 5; ++v) {
    for (int turn = 1; turn <= 4; ++turn) {
      const std::string text = chatml(turn, v);
      ASSERT_TRUE(cache.encode(*tok, text, ids).ok());
      ASSERT_EQ(ids, *tok->encode(text));
    }
  }
}

TEST(PromptCache, StaysWithinItsBudgetAndStaysExact) {
  KVGATE_REQUIRE_FIXTURE(tok, "qwen3");
  PromptCache cache(4096);  // a few hundred ids: entries get evicted all the time
  std::vector<uint32_t> ids;
  for (int round = 0; round < 3; ++round) {
    for (int turn = 1; turn <= 12; turn += 1 + round) {
      const std::string text = chatml(turn, round);
      ASSERT_TRUE(cache.encode(*tok, text, ids).ok());
      ASSERT_EQ(ids, *tok->encode(text));
      EXPECT_LE(cache.bytes(), 4096u);
    }
  }
  cache.clear();
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(PromptCache, TextWithoutAddedTokensAndBadUtf8) {
  Tokenizer tok = *Tokenizer::load(testing::tiny_tokenizer_json());
  PromptCache cache(1 << 16);
  std::vector<uint32_t> ids;
  ASSERT_TRUE(cache.encode(tok, "hello world", ids).ok());
  EXPECT_EQ(ids, *tok.encode("hello world"));
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_FALSE(cache.encode(tok, "hello<|end|>\xFF", ids).ok());
  // A boundary with rstrip whitespace: the cut comes after the stripped spaces.
  for (const char* t : {"hello <x>  hello<|end|>", "hello <x>  hello<|end|> hello world"}) {
    ASSERT_TRUE(cache.encode(tok, t, ids).ok());
    EXPECT_EQ(ids, *tok.encode(t)) << t;
  }
}

}  // namespace
}  // namespace kvgate::tokenizer

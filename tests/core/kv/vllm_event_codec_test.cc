#include "core/kv/vllm_event_codec.h"

#include <gtest/gtest.h>
#include <msgpuck.h>

namespace kvgate::kv {
namespace {

EventBatch sample_batch() {
  EventBatch b;
  b.ts = 1732924800.25;
  BlockStored s;
  s.block_hashes = {0xFFFFFFFFFFFFFFFFull, 7};
  s.parent_block_hash = 42;
  for (uint32_t i = 0; i < 8; ++i) s.token_ids.push_back(i * 1000);
  s.block_size = 4;
  s.medium = "GPU";
  b.events.emplace_back(s);
  b.events.emplace_back(BlockRemoved{{7}, std::string("GPU")});
  b.events.emplace_back(AllBlocksCleared{});
  b.data_parallel_rank = 0;
  return b;
}

TEST(VllmEventCodec, RoundTripsBothForms) {
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    const EventBatch b = sample_batch();
    auto back = decode_event_batch(encode_event_batch(b, f));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(*back, b);
  }
}

TEST(VllmEventCodec, ArrayFormBytesFollowMsgspec) {
  EventBatch b;
  b.ts = 1.5;
  b.events.emplace_back(BlockRemoved{{1, 300}, std::string("GPU")});
  b.data_parallel_rank = 0;
  const std::string p = encode_event_batch(b, EventFormat::kArray);
  // 93 | cb <8 bytes 1.5> | 91 | 93 ac "BlockRemoved" 92 01 cd 01 2c a3 "GPU" | 00
  static const char kHead[] = "\x93\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00\x91\x93\xac";
  std::string want(kHead, sizeof(kHead) - 1);
  want += "BlockRemoved";
  want += std::string("\x92\x01\xcd\x01\x2c\xa3", 6);
  want += "GPU";
  want += std::string("\x00", 1);
  EXPECT_EQ(p, want);
}

TEST(VllmEventCodec, MapFormHasTypeFirstAndNamedFields) {
  EventBatch b;
  b.ts = 2;
  b.events.emplace_back(AllBlocksCleared{});
  const std::string p = encode_event_batch(b, EventFormat::kMap);
  // {"ts": 2.0, "events": [{"type": "AllBlocksCleared"}]}; no rank: omitted.
  const char* c = p.data();
  ASSERT_EQ(mp_typeof(*c), MP_MAP);
  EXPECT_EQ(mp_decode_map(&c), 2u);
  auto str = [&c] {
    uint32_t n = 0;
    const char* s = mp_decode_str(&c, &n);
    return std::string(s, n);
  };
  EXPECT_EQ(str(), "ts");
  EXPECT_EQ(mp_decode_double(&c), 2.0);
  EXPECT_EQ(str(), "events");
  EXPECT_EQ(mp_decode_array(&c), 1u);
  EXPECT_EQ(mp_decode_map(&c), 1u);
  EXPECT_EQ(str(), "type");
  EXPECT_EQ(str(), "AllBlocksCleared");
}

// Builds msgpack by hand for the decoder's tolerance tests.
struct Mp {
  std::string s;
  char buf[64];
  Mp& arr(uint32_t n) { return put(mp_encode_array(buf, n)); }
  Mp& map(uint32_t n) { return put(mp_encode_map(buf, n)); }
  Mp& u(uint64_t v) { return put(mp_encode_uint(buf, v)); }
  Mp& d(double v) { return put(mp_encode_double(buf, v)); }
  Mp& nil() { return put(mp_encode_nil(buf)); }
  Mp& str(std::string_view v) {
    s.append(buf, mp_encode_strl(buf, static_cast<uint32_t>(v.size())));
    s += v;
    return *this;
  }
  Mp& bin(std::string_view v) {
    s.append(buf, mp_encode_binl(buf, static_cast<uint32_t>(v.size())));
    s += v;
    return *this;
  }
  Mp& put(char* end) {
    s.append(buf, end);
    return *this;
  }
};

TEST(VllmEventCodec, DecodesOldTwoElementBatchWithExtraTrailingFields) {
  Mp m;
  m.arr(2).d(3.0).arr(1);
  // BlockStored with 12 fields: extra_keys, group_idx, kind, sliding window appended.
  m.arr(12).str("BlockStored").arr(1).u(9).nil().arr(2).u(1).u(2).u(2).nil().str("GPU").nil();
  m.nil().u(0).str("full_attention").nil();
  auto b = decode_event_batch(m.s);
  ASSERT_TRUE(b) << b.error();
  EXPECT_FALSE(b->data_parallel_rank.has_value());
  ASSERT_EQ(b->events.size(), 1u);
  const auto& s = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(s.block_hashes, std::vector<EngineBlockHash>{9});
  EXPECT_FALSE(s.parent_block_hash.has_value());
  EXPECT_EQ(s.block_size, 2u);
}

TEST(VllmEventCodec, CacheSaltRoundTripsAsExtraKeysOfTheFirstBlock) {
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    for (bool lora : {false, true}) {
      EventBatch b;
      b.ts = 2.0;
      BlockStored s;
      s.block_hashes = {5, 6};
      s.token_ids = {1, 2, 3, 4};
      s.block_size = 2;
      s.medium = "GPU";
      if (lora) {
        s.lora_id = 1;
        s.lora_name = "sql";
      }
      s.cache_salt = "tenant-a";
      b.events.emplace_back(s);
      const std::string payload = encode_event_batch(b, f);
      auto back = decode_event_batch(payload);
      ASSERT_TRUE(back) << back.error();
      EXPECT_EQ(*back, b);
    }
  }
}

TEST(VllmEventCodec, ExtraKeysOfAnAdapterAloneCarryNoSalt) {
  // vLLM with a LoRA request and no salt: every block's extra keys are the adapter's name.
  Mp m;
  m.arr(2).d(3.0).arr(1);
  m.arr(9).str("BlockStored").arr(2).u(9).u(10).nil().arr(4).u(1).u(2).u(3).u(4).u(2).u(1);
  m.str("GPU").str("sql").arr(2).arr(1).str("sql").arr(1).str("sql");
  auto b = decode_event_batch(m.s);
  ASSERT_TRUE(b) << b.error();
  const auto& s = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(s.lora_name, "sql");
  EXPECT_FALSE(s.cache_salt.has_value());

  // The salt after the adapter's name, a non-string key skipped; a chained event's first
  // block carries none (and its extra keys are not read as one).
  Mp salted;
  salted.arr(2).d(3.0).arr(2);
  salted.arr(9).str("BlockStored").arr(1).u(9).nil().arr(2).u(1).u(2).u(2).u(1).str("GPU");
  salted.str("sql").arr(1).arr(3).str("sql").u(7).str("tenant-a");
  salted.arr(9).str("BlockStored").arr(1).u(10).u(9).arr(2).u(3).u(4).u(2).u(1).str("GPU");
  salted.str("sql").arr(1).arr(2).str("sql").str("not-a-salt");
  auto c = decode_event_batch(salted.s);
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->events.size(), 2u);
  EXPECT_EQ(std::get<BlockStored>(c->events[0]).cache_salt, "tenant-a");
  EXPECT_FALSE(std::get<BlockStored>(c->events[1]).cache_salt.has_value());
}

TEST(VllmEventCodec, BinaryHashesTakeLastEightBytesBigEndian) {
  std::string digest(32, '\0');
  for (int i = 0; i < 32; ++i) digest[i] = static_cast<char>(i);
  Mp m;
  m.arr(3).d(1).arr(1).arr(3).str("BlockRemoved").arr(1).bin(digest).nil().u(1);
  auto b = decode_event_batch(m.s);
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(std::get<BlockRemoved>(b->events[0]).block_hashes[0], 0x18191a1b1c1d1e1full);
  EXPECT_EQ(b->data_parallel_rank, 1);
}

TEST(VllmEventCodec, MapEventsWithAbsentNilFieldsAndUnknownKeys) {
  Mp m;
  m.map(2).str("events").arr(1);
  m.map(4)
      .str("block_hashes")
      .arr(1)
      .u(5)
      .str("group_idx")
      .u(0)
      .str("type")
      .str("BlockRemoved")
      .str("medium")
      .str("CPU");
  m.str("ts").d(4);
  auto b = decode_event_batch(m.s);
  ASSERT_TRUE(b) << b.error();
  const auto& r = std::get<BlockRemoved>(b->events.at(0));
  EXPECT_EQ(r.block_hashes[0], 5u);
  EXPECT_EQ(r.medium, "CPU");
  EXPECT_EQ(b->ts, 4);
}

TEST(VllmEventCodec, UnknownTagsAreSkipped) {
  Mp m;
  m.arr(2).d(1).arr(2).arr(2).str("FutureEvent").u(1).arr(1).str("AllBlocksCleared");
  size_t skipped = 0;
  auto b = decode_event_batch(m.s, &skipped);
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->events.size(), 1u);
  EXPECT_EQ(skipped, 1u);
}

TEST(VllmEventCodec, TokenlessCpuCopiesRoundTripBothForms) {
  // What vLLM's CPU offloading connector sends (and `kvgate engine` with a host tier):
  // copies of known blocks, by hash, without tokens or parent, medium CPU.
  for (EventFormat f : {EventFormat::kArray, EventFormat::kMap}) {
    EventBatch b;
    b.ts = 3.0;
    BlockStored s;
    s.block_hashes = {5, 6};
    s.block_size = 16;
    s.medium = "CPU";
    b.events.emplace_back(s);
    b.events.emplace_back(BlockRemoved{{5}, std::string("CPU")});
    auto back = decode_event_batch(encode_event_batch(b, f));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(*back, b);
  }
}

TEST(VllmEventCodec, ArrayEventsFromBeforeMediumDecodeWithoutOne) {
  // ["BlockStored", hashes, parent, token_ids, block_size, lora_id] and
  // ["BlockRemoved", hashes], as vLLM sent them before `medium`.
  Mp m;
  m.arr(2).d(1).arr(2);
  m.arr(6).str("BlockStored").arr(1).u(9).nil().arr(2).u(1).u(2).u(2).nil();
  m.arr(2).str("BlockRemoved").arr(1).u(9);
  auto b = decode_event_batch(m.s);
  ASSERT_TRUE(b) << b.error();
  ASSERT_EQ(b->events.size(), 2u);
  const auto& s = std::get<BlockStored>(b->events[0]);
  EXPECT_EQ(s.block_hashes, (std::vector<EngineBlockHash>{9}));
  EXPECT_EQ(s.token_ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_FALSE(s.medium.has_value());
  EXPECT_FALSE(s.lora_name.has_value());
  const auto& r = std::get<BlockRemoved>(b->events[1]);
  EXPECT_EQ(r.block_hashes, (std::vector<EngineBlockHash>{9}));
  EXPECT_FALSE(r.medium.has_value());
}

TEST(VllmEventCodec, MalformedAndTruncatedInputIsAnError) {
  const std::string good = encode_event_batch(sample_batch(), EventFormat::kArray);
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode_event_batch(good.substr(0, n))) << "prefix " << n;
  }
  EXPECT_FALSE(decode_event_batch("\xc1"));
  Mp wrong;
  wrong.arr(2).str("ts").arr(0);
  EXPECT_FALSE(decode_event_batch(wrong.s));
  Mp short_stored;
  short_stored.arr(2).d(1).arr(1).arr(3).str("BlockStored").arr(0).nil();
  EXPECT_FALSE(decode_event_batch(short_stored.s));
  Mp bad_hash;
  bad_hash.arr(2).d(1).arr(1).arr(3).str("BlockRemoved").arr(1).str("x").nil();
  EXPECT_TRUE(decode_event_batch(bad_hash.s));  // a 1-byte str digest is accepted as bytes
  Mp bad_type;
  bad_type.arr(2).d(1).arr(1).arr(3).str("BlockRemoved").arr(1).d(1.5).nil();
  EXPECT_FALSE(decode_event_batch(bad_type.s));
  // Every single-byte corruption either decodes or fails cleanly.
  for (size_t i = 0; i < good.size(); ++i) {
    for (int v : {0x00, 0x7f, 0x80, 0x9f, 0xc0, 0xc1, 0xdd, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(v);
      (void)decode_event_batch(bad);
    }
  }
}

}  // namespace
}  // namespace kvgate::kv

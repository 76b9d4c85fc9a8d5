#include "core/engine/greedy_decode.h"

#include "core/common/fast_mod.h"

namespace kvgate::engine {
namespace {

uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The state after one more token: a chain over the whole context, in order.
uint64_t fold(uint64_t state, kv::TokenId token) {
  return mix(state ^ (0x9e3779b97f4a7c15ULL * (uint64_t{token} + 1)));
}

}  // namespace

std::vector<kv::TokenId> greedy_continuation(std::span<const kv::TokenId> context, uint32_t count,
                                             uint32_t vocab_size) {
  const FastMod vocab(vocab_size);
  uint64_t state = 0x6b76676174650000ULL;  // "kvgate"
  for (kv::TokenId t : context) state = fold(state, t);
  std::vector<kv::TokenId> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const auto next = static_cast<kv::TokenId>(vocab.mod(mix(state + 0x5851f42d4c957f2dULL)));
    out.push_back(next);
    state = fold(state, next);
  }
  return out;
}

}  // namespace kvgate::engine

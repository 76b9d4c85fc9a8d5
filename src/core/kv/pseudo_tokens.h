// Pseudo-tokens: routing ids for a prompt no tokenizer can cut exactly (a pool without
// tokenizer.json, or one whose engines could not be asked in time).
//
// Every 4 bytes of the prompt text are one id (big-endian: the first byte is the high
// one; a last partial group holds the remaining bytes), so a shared text prefix still
// gives shared block keys, and the count is of the right order for load tracking. The
// ids never meet an engine's: a pool routed on them learns prefixes from its own
// routing history (the approximate index), not from KV events.
//
//   std::vector<uint32_t> ids;
//   kv::append_pseudo_tokens(prompt_text, ids);   // (size + 3) / 4 ids appended
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace kvgate::kv {

inline void append_pseudo_tokens(std::string_view text, std::vector<uint32_t>& ids) {
  const size_t base = ids.size();
  ids.resize(base + (text.size() + 3) / 4);
  const size_t whole = text.size() / 4;
  for (size_t i = 0; i < whole; ++i) {
    uint32_t v;
    std::memcpy(&v, text.data() + 4 * i, 4);
    ids[base + i] = std::endian::native == std::endian::little ? __builtin_bswap32(v) : v;
  }
  if (base + whole < ids.size()) {
    uint32_t v = 0;
    for (size_t j = 4 * whole; j < text.size(); ++j) v = v << 8 | static_cast<uint8_t>(text[j]);
    ids[base + whole] = v;
  }
}

}  // namespace kvgate::kv

#include "core/kv/vllm_event_codec.h"

#include <msgpuck.h>

#include <algorithm>
#include <cstring>
#include <span>

namespace kvgate::kv {
namespace {

// ---- encoding ----

class Writer {
 public:
  void array(uint32_t n) {
    grow(mp_sizeof_array(n), [&](char* p) { return mp_encode_array(p, n); });
  }
  void map(uint32_t n) {
    grow(mp_sizeof_map(n), [&](char* p) { return mp_encode_map(p, n); });
  }
  void nil() {
    grow(mp_sizeof_nil(), [](char* p) { return mp_encode_nil(p); });
  }
  void uint(uint64_t v) {
    grow(mp_sizeof_uint(v), [&](char* p) { return mp_encode_uint(p, v); });
  }
  void sint(int64_t v) {
    if (v >= 0) return uint(static_cast<uint64_t>(v));
    grow(mp_sizeof_int(v), [&](char* p) { return mp_encode_int(p, v); });
  }
  void dbl(double v) {
    grow(mp_sizeof_double(v), [&](char* p) { return mp_encode_double(p, v); });
  }
  void str(std::string_view s) {
    const auto n = static_cast<uint32_t>(s.size());
    grow(mp_sizeof_str(n), [&](char* p) { return mp_encode_str(p, s.data(), n); });
  }
  void opt_uint(const std::optional<uint64_t>& v) { v ? uint(*v) : nil(); }
  void opt_int(const std::optional<int64_t>& v) { v ? sint(*v) : nil(); }
  void opt_str(const std::optional<std::string>& v) { v ? str(*v) : nil(); }
  void hashes(const std::vector<EngineBlockHash>& hs) {
    array(static_cast<uint32_t>(hs.size()));
    for (EngineBlockHash h : hs) uint(h);
  }
  std::string take() { return std::move(out_); }

 private:
  template <typename F>
  void grow(size_t n, F&& encode) {
    const size_t at = out_.size();
    out_.resize(at + n);
    encode(out_.data() + at);
  }
  std::string out_;
};

void encode_event(Writer& w, const KvEvent& event, EventFormat format) {
  const bool as_map = format == EventFormat::kMap;
  if (const auto* s = std::get_if<BlockStored>(&event)) {
    // extra_keys only when there is a salt to carry: without one the event is the
    // 8 fields it always was (what vLLM's omit_defaults sends when extra_keys is None).
    const bool extra = s->cache_salt.has_value();
    if (as_map) {
      w.map(extra ? 9 : 8);
      w.str("type");
    } else {
      w.array(extra ? 9 : 8);
    }
    w.str("BlockStored");
    if (as_map) w.str("block_hashes");
    w.hashes(s->block_hashes);
    if (as_map) w.str("parent_block_hash");
    w.opt_uint(s->parent_block_hash);
    if (as_map) w.str("token_ids");
    w.array(static_cast<uint32_t>(s->token_ids.size()));
    for (uint32_t t : s->token_ids) w.uint(t);
    if (as_map) w.str("block_size");
    w.uint(s->block_size);
    if (as_map) w.str("lora_id");
    w.opt_int(s->lora_id);
    if (as_map) w.str("medium");
    w.opt_str(s->medium);
    if (as_map) w.str("lora_name");
    w.opt_str(s->lora_name);
    if (extra) {
      // vLLM's per-block extra keys: the adapter's name on every block of an adapter's
      // request, then the salt on the first block only (generate_block_hash_extra_keys).
      if (as_map) w.str("extra_keys");
      w.array(static_cast<uint32_t>(s->block_hashes.size()));
      for (size_t i = 0; i < s->block_hashes.size(); ++i) {
        const bool salt = i == 0 && !s->parent_block_hash;
        const uint32_t n = (s->lora_name ? 1u : 0u) + (salt ? 1u : 0u);
        if (n == 0) {
          w.nil();
          continue;
        }
        w.array(n);
        if (s->lora_name) w.str(*s->lora_name);
        if (salt) w.str(*s->cache_salt);
      }
    }
  } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
    if (as_map) {
      w.map(3);
      w.str("type");
    } else {
      w.array(3);
    }
    w.str("BlockRemoved");
    if (as_map) w.str("block_hashes");
    w.hashes(r->block_hashes);
    if (as_map) w.str("medium");
    w.opt_str(r->medium);
  } else {
    if (as_map) {
      w.map(1);
      w.str("type");
    } else {
      w.array(1);
    }
    w.str("AllBlocksCleared");
  }
}

// ---- decoding ----
// The whole payload is validated first (validate_msgpack), so every read below stays inside
// the buffer; the decoder still checks each value's type before reading it.

// mp_check() counts pending values in an int, so a forged array32 header wraps it and
// passes; this validator counts in 64 bits and bounds every length against the buffer.
bool validate_msgpack(const char* p, const char* end) {
  auto load = [](const char* q, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(q[i]);
    return v;
  };
  uint64_t pending = 1;
  while (pending > 0) {
    --pending;
    const size_t left = static_cast<size_t>(end - p);
    if (left == 0) return false;
    const uint8_t c = static_cast<uint8_t>(*p);
    size_t head = 1;        // header bytes including the type byte
    uint64_t payload = 0;   // bytes after the header
    int len_bytes = 0;      // size of a length field that follows the type byte
    uint64_t children = 0;  // nested values
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
    } else if (c <= 0x8f) {
      children = 2u * (c & 0x0f);
    } else if (c <= 0x9f) {
      children = c & 0x0f;
    } else if (c <= 0xbf) {
      payload = c & 0x1f;
    } else {
      switch (c) {
        case 0xc4:
        case 0xd9:
          len_bytes = 1;
          break;
        case 0xc5:
        case 0xda:
          len_bytes = 2;
          break;
        case 0xc6:
        case 0xdb:
          len_bytes = 4;
          break;
        case 0xc7:
          len_bytes = 1;
          payload = 1;
          break;
        case 0xc8:
          len_bytes = 2;
          payload = 1;
          break;
        case 0xc9:
          len_bytes = 4;
          payload = 1;
          break;
        case 0xca:
          payload = 4;
          break;
        case 0xcb:
          payload = 8;
          break;
        case 0xcc:
        case 0xd0:
          payload = 1;
          break;
        case 0xcd:
        case 0xd1:
          payload = 2;
          break;
        case 0xce:
        case 0xd2:
          payload = 4;
          break;
        case 0xcf:
        case 0xd3:
          payload = 8;
          break;
        case 0xd4:
          payload = 2;
          break;
        case 0xd5:
          payload = 3;
          break;
        case 0xd6:
          payload = 5;
          break;
        case 0xd7:
          payload = 9;
          break;
        case 0xd8:
          payload = 17;
          break;
        case 0xdc:
          head = 3;
          if (left < head) return false;
          children = load(p + 1, 2);
          break;
        case 0xdd:
          head = 5;
          if (left < head) return false;
          children = load(p + 1, 4);
          break;
        case 0xde:
          head = 3;
          if (left < head) return false;
          children = 2 * load(p + 1, 2);
          break;
        case 0xdf:
          head = 5;
          if (left < head) return false;
          children = 2 * load(p + 1, 4);
          break;
        default:
          return false;  // 0xc1 is never used
      }
    }
    if (len_bytes > 0) {
      head = 1 + static_cast<size_t>(len_bytes);
      if (left < head) return false;
      payload += load(p + 1, len_bytes);
    }
    if (left < head || left - head < payload) return false;
    p += head + payload;
    pending += children;
  }
  return true;
}

using Cursor = const char*;

bool is(Cursor p, mp_type t) { return mp_typeof(*p) == t; }

Result<std::string_view> read_str(Cursor& p) {
  if (!is(p, MP_STR)) return Error("expected a string");
  uint32_t n = 0;
  const char* s = mp_decode_str(&p, &n);
  return std::string_view(s, n);
}

Result<uint64_t> read_uint(Cursor& p) {
  if (is(p, MP_UINT)) return mp_decode_uint(&p);
  if (is(p, MP_INT)) {
    const int64_t v = mp_decode_int(&p);
    return static_cast<uint64_t>(v);  // two's complement, as Python's & (2**64 - 1)
  }
  return Error("expected an integer");
}

Result<int64_t> read_int(Cursor& p) {
  if (is(p, MP_INT)) return mp_decode_int(&p);
  if (is(p, MP_UINT)) return static_cast<int64_t>(mp_decode_uint(&p));
  return Error("expected an integer");
}

Result<EngineBlockHash> read_hash(Cursor& p) {
  if (is(p, MP_BIN) || is(p, MP_STR)) {
    uint32_t n = 0;
    const char* b = is(p, MP_BIN) ? mp_decode_bin(&p, &n) : mp_decode_str(&p, &n);
    uint64_t v = 0;
    const uint32_t from = n > 8 ? n - 8 : 0;
    for (uint32_t i = from; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }
  return read_uint(p);
}

Result<std::optional<EngineBlockHash>> read_opt_hash(Cursor& p) {
  if (is(p, MP_NIL)) {
    mp_next(&p);
    return std::optional<EngineBlockHash>();
  }
  auto h = read_hash(p);
  if (!h) return Error(h.error());
  return std::optional<EngineBlockHash>(*h);
}

Result<std::optional<int64_t>> read_opt_int(Cursor& p) {
  if (is(p, MP_NIL)) {
    mp_next(&p);
    return std::optional<int64_t>();
  }
  auto v = read_int(p);
  if (!v) return Error(v.error());
  return std::optional<int64_t>(*v);
}

Result<std::optional<std::string>> read_opt_str(Cursor& p) {
  if (is(p, MP_NIL)) {
    mp_next(&p);
    return std::optional<std::string>();
  }
  auto s = read_str(p);
  if (!s) return Error(s.error());
  return std::optional<std::string>(std::string(*s));
}

Status read_hashes(Cursor& p, std::vector<EngineBlockHash>& out) {
  if (!is(p, MP_ARRAY)) return Error("block_hashes: expected an array");
  const uint32_t n = mp_decode_array(&p);
  out.reserve(std::min<uint32_t>(n, 4096));
  for (uint32_t i = 0; i < n; ++i) {
    auto h = read_hash(p);
    if (!h) return Error("block_hashes: " + h.error());
    out.push_back(*h);
  }
  return {};
}

Status read_tokens(Cursor& p, std::vector<uint32_t>& out) {
  if (!is(p, MP_ARRAY)) return Error("token_ids: expected an array");
  const uint32_t n = mp_decode_array(&p);
  out.reserve(std::min<uint32_t>(n, 4096));
  for (uint32_t i = 0; i < n; ++i) {
    auto t = read_uint(p);
    if (!t || *t > UINT32_MAX) return Error("token_ids: expected token ids");
    out.push_back(static_cast<uint32_t>(*t));
  }
  return {};
}

// extra_keys: the string keys of the first block's entry into `first` (non-string keys,
// such as a prompt embedding's digest, are skipped); the other blocks' are not needed.
Status read_extra_keys(Cursor& p, std::vector<std::string_view>& first) {
  if (is(p, MP_NIL)) {
    mp_next(&p);
    return {};
  }
  if (!is(p, MP_ARRAY)) return Error("expected an array or nil");
  const uint32_t n = mp_decode_array(&p);
  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0 || !is(p, MP_ARRAY)) {
      mp_next(&p);
      continue;
    }
    const uint32_t keys = mp_decode_array(&p);
    for (uint32_t k = 0; k < keys; ++k) {
      if (!is(p, MP_STR)) {
        mp_next(&p);
        continue;
      }
      auto key = read_str(p);
      if (!key) return Error(key.error());
      first.push_back(*key);
    }
  }
  return {};
}

// The salt of a root BlockStored from its first block's extra keys: vLLM lists the
// adapter's name first, then multimodal identifiers, then the salt; the last key left
// after the adapter's name is taken as the salt. (A multimodal identifier taken for a salt
// only makes the chain one no request matches, never a false match.)
void set_cache_salt(BlockStored& s, std::span<const std::string_view> first) {
  if (s.parent_block_hash) return;  // the salt is only in a chain's first block
  if (s.lora_name && !first.empty() && first.front() == *s.lora_name) first = first.subspan(1);
  if (!first.empty()) s.cache_salt = std::string(first.back());
}

// Reads the field named `name` of event `tag` at `p`, storing it into `event` (the first
// block's extra keys into `extra`, for set_cache_salt). Unknown fields are skipped.
Status read_field(std::string_view tag, std::string_view name, Cursor& p, KvEvent& event,
                  std::vector<std::string_view>& extra) {
#define KV_TRY(expr, target)                                      \
  do {                                                            \
    auto r_ = (expr);                                             \
    if (!r_) return Error(std::string(name) + ": " + r_.error()); \
    target = std::move(*r_);                                      \
  } while (0)
  if (tag == "BlockStored") {
    auto& s = std::get<BlockStored>(event);
    if (name == "block_hashes") return read_hashes(p, s.block_hashes);
    if (name == "parent_block_hash") {
      KV_TRY(read_opt_hash(p), s.parent_block_hash);
      return {};
    }
    if (name == "token_ids") return read_tokens(p, s.token_ids);
    if (name == "block_size") {
      uint64_t v = 0;
      KV_TRY(read_uint(p), v);
      if (v > UINT32_MAX) return Error("block_size out of range");
      s.block_size = static_cast<uint32_t>(v);
      return {};
    }
    if (name == "lora_id") {
      KV_TRY(read_opt_int(p), s.lora_id);
      return {};
    }
    if (name == "medium") {
      KV_TRY(read_opt_str(p), s.medium);
      return {};
    }
    if (name == "lora_name") {
      KV_TRY(read_opt_str(p), s.lora_name);
      return {};
    }
    if (name == "extra_keys") {
      if (Status st = read_extra_keys(p, extra); !st) return Error("extra_keys: " + st.error());
      return {};
    }
  } else if (tag == "BlockRemoved") {
    auto& r = std::get<BlockRemoved>(event);
    if (name == "block_hashes") return read_hashes(p, r.block_hashes);
    if (name == "medium") {
      KV_TRY(read_opt_str(p), r.medium);
      return {};
    }
  }
#undef KV_TRY
  mp_next(&p);
  return {};
}

constexpr std::string_view kStoredFields[] = {"block_hashes", "parent_block_hash", "token_ids",
                                              "block_size",   "lora_id",           "medium",
                                              "lora_name",    "extra_keys"};
// Fields an array-form event must have. BlockStored: through lora_id, as the first vLLM
// versions sent it; medium and lora_name came later, extra_keys later still (and is
// omitted when None). BlockRemoved: its hashes (medium came later). An absent medium
// decodes as none, which means GPU (kv_event.h).
constexpr size_t kStoredRequired = 5;
constexpr std::string_view kRemovedFields[] = {"block_hashes", "medium"};
constexpr size_t kRemovedRequired = 1;

// Decodes one event; returns nullopt for an unknown tag (the value is skipped).
Result<std::optional<KvEvent>> read_event(Cursor& p) {
  KvEvent event;
  std::vector<std::string_view> extra;  // BlockStored: the first block's extra keys
  auto finish = [&]() {
    if (auto* s = std::get_if<BlockStored>(&event); s && !extra.empty()) set_cache_salt(*s, extra);
  };
  auto start = [&](std::string_view tag) -> bool {
    if (tag == "BlockStored") {
      event = BlockStored{};
    } else if (tag == "BlockRemoved") {
      event = BlockRemoved{};
    } else if (tag == "AllBlocksCleared") {
      event = AllBlocksCleared{};
    } else {
      return false;
    }
    return true;
  };
  if (is(p, MP_ARRAY)) {
    const uint32_t n = mp_decode_array(&p);
    if (n == 0) return Error("event: empty array");
    auto tag = read_str(p);
    if (!tag) return Error("event tag: " + tag.error());
    const bool known = start(*tag);
    std::span<const std::string_view> fields;
    size_t required = 0;
    if (*tag == "BlockStored") {
      fields = kStoredFields;
      required = kStoredRequired;
    }
    if (*tag == "BlockRemoved") {
      fields = kRemovedFields;
      required = kRemovedRequired;
    }
    if (known && n - 1 < required) return Error(std::string(*tag) + ": too few fields");
    for (uint32_t i = 1; i < n; ++i) {
      if (!known || i - 1 >= fields.size()) {
        mp_next(&p);
        continue;
      }
      Status s = read_field(*tag, fields[i - 1], p, event, extra);
      if (!s) return Error(std::string(*tag) + "." + s.error());
    }
    if (!known) return std::optional<KvEvent>();
    finish();
    return std::optional<KvEvent>(std::move(event));
  }
  if (is(p, MP_MAP)) {
    // The tag may come anywhere; find it first.
    const uint32_t n = mp_decode_map(&p);
    Cursor scan = p;
    std::optional<std::string_view> tag;
    for (uint32_t i = 0; i < n; ++i) {
      auto key = read_str(scan);
      if (!key) return Error("event: map key " + key.error());
      if (*key == "type") {
        auto t = read_str(scan);
        if (!t) return Error("event type: " + t.error());
        tag = *t;
      } else {
        mp_next(&scan);
      }
    }
    if (!tag) return Error("event: map without \"type\"");
    const bool known = start(*tag);
    for (uint32_t i = 0; i < n; ++i) {
      auto key = read_str(p);
      if (!key) return Error("event: map key " + key.error());
      if (!known || *key == "type") {
        mp_next(&p);
        continue;
      }
      Status s = read_field(*tag, *key, p, event, extra);
      if (!s) return Error(std::string(*tag) + "." + s.error());
    }
    if (!known) return std::optional<KvEvent>();
    finish();
    return std::optional<KvEvent>(std::move(event));
  }
  return Error("event: expected an array or a map");
}

Status read_events(Cursor& p, EventBatch& batch, size_t* skipped) {
  if (!is(p, MP_ARRAY)) return Error("events: expected an array");
  const uint32_t n = mp_decode_array(&p);
  for (uint32_t i = 0; i < n; ++i) {
    auto e = read_event(p);
    if (!e) return Error("events[" + std::to_string(i) + "]: " + e.error());
    if (*e) {
      batch.events.push_back(std::move(**e));
    } else if (skipped) {
      ++*skipped;
    }
  }
  return {};
}

Status read_ts(Cursor& p, EventBatch& batch) {
  if (is(p, MP_DOUBLE)) {
    batch.ts = mp_decode_double(&p);
  } else if (is(p, MP_FLOAT)) {
    batch.ts = mp_decode_float(&p);
  } else if (is(p, MP_UINT) || is(p, MP_INT)) {
    auto v = read_int(p);
    if (!v) return Error("ts: " + v.error());
    batch.ts = static_cast<double>(*v);
  } else {
    return Error("ts: expected a number");
  }
  return {};
}

}  // namespace

Result<EventFormat> parse_event_format(std::string_view name) {
  if (name == "array") return EventFormat::kArray;
  if (name == "map") return EventFormat::kMap;
  return Error("unknown KV event format \"" + std::string(name) + "\" (array|map)");
}

std::string encode_event_batch(const EventBatch& batch, EventFormat format) {
  Writer w;
  const bool has_rank = batch.data_parallel_rank.has_value();
  if (format == EventFormat::kMap) {
    w.map(has_rank ? 3 : 2);
    w.str("ts");
  } else {
    w.array(has_rank ? 3 : 2);
  }
  w.dbl(batch.ts);
  if (format == EventFormat::kMap) w.str("events");
  w.array(static_cast<uint32_t>(batch.events.size()));
  for (const KvEvent& e : batch.events) encode_event(w, e, format);
  if (has_rank) {
    if (format == EventFormat::kMap) w.str("data_parallel_rank");
    w.sint(*batch.data_parallel_rank);
  }
  return w.take();
}

Result<EventBatch> decode_event_batch(std::string_view payload, size_t* skipped) {
  if (payload.empty()) return Error("KV event batch: empty payload");
  if (!validate_msgpack(payload.data(), payload.data() + payload.size())) {
    return Error("KV event batch: malformed or truncated msgpack");
  }
  Cursor p = payload.data();
  EventBatch batch;
  auto fail = [](const std::string& m) { return Error("KV event batch: " + m); };
  if (is(p, MP_ARRAY)) {
    const uint32_t n = mp_decode_array(&p);
    if (n < 2) return fail("expected [ts, events, ...]");
    if (Status s = read_ts(p, batch); !s) return fail(s.error());
    if (Status s = read_events(p, batch, skipped); !s) return fail(s.error());
    if (n >= 3) {
      auto rank = read_opt_int(p);
      if (!rank) return fail("data_parallel_rank: " + rank.error());
      batch.data_parallel_rank = *rank;
    }
    return batch;
  }
  if (is(p, MP_MAP)) {
    const uint32_t n = mp_decode_map(&p);
    bool have_ts = false, have_events = false;
    for (uint32_t i = 0; i < n; ++i) {
      auto key = read_str(p);
      if (!key) return fail("map key " + key.error());
      if (*key == "ts") {
        if (Status s = read_ts(p, batch); !s) return fail(s.error());
        have_ts = true;
      } else if (*key == "events") {
        if (Status s = read_events(p, batch, skipped); !s) return fail(s.error());
        have_events = true;
      } else if (*key == "data_parallel_rank") {
        auto rank = read_opt_int(p);
        if (!rank) return fail("data_parallel_rank: " + rank.error());
        batch.data_parallel_rank = *rank;
      } else {
        mp_next(&p);
      }
    }
    if (!have_ts || !have_events) return fail("map without ts or events");
    return batch;
  }
  return fail("expected an array or a map");
}

}  // namespace kvgate::kv

#include "core/tokenizer/tokenizer.h"

#include "core/common/unicode.h"
#include "core/tokenizer/byte_level.h"

namespace kvgate::tokenizer {

using unicode::find_invalid_utf8;
using unicode::utf8_lossy;

// Scratch of one encode call; allocates only what the configured components use.
struct Tokenizer::Work {
  std::vector<AddedTokenMatcher::Match> hits;
  std::vector<AddedTokenMatcher::Match> normalized_hits;
  std::string normalized;
  std::vector<Piece> pieces;
  PreTokenizer::Scratch pre;
};

Result<std::vector<uint32_t>> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  Status st = encode_into(text, ids);
  if (!st) return Error(st.error());
  return ids;
}

Status Tokenizer::encode_into(std::string_view text, std::vector<uint32_t>& out,
                              std::vector<Boundary>* boundaries) const {
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    return Error("invalid UTF-8 at byte " + std::to_string(bad) + " of the text");
  const size_t base = out.size();
  Work w;
  raw_matcher_.find_all(text, w.hits);
  size_t at = 0;
  for (const AddedTokenMatcher::Match& m : w.hits) {
    if (m.start > at) {
      if (Status st = encode_segment(text.substr(at, m.start - at), at == 0, out, w); !st)
        return st;
    }
    out.push_back(m.id);
    if (boundaries && cut_exact_) boundaries->push_back(Boundary{m.end, out.size() - base});
    at = m.end;
  }
  if (at < text.size()) return encode_segment(text.substr(at), at == 0, out, w);
  return {};
}

Status Tokenizer::find_boundaries(std::string_view text, std::vector<Boundary>& out) const {
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    return Error("invalid UTF-8 at byte " + std::to_string(bad) + " of the text");
  if (!cut_exact_) return {};
  std::vector<AddedTokenMatcher::Match> hits;
  raw_matcher_.find_all(text, hits);
  for (const AddedTokenMatcher::Match& m : hits) out.push_back(Boundary{m.end, 0});
  return {};
}

Status Tokenizer::encode_segment(std::string_view text, bool at_start, std::vector<uint32_t>& out,
                                 Work& w) const {
  if (!normalizer_.empty()) {
    if (Status st = normalizer_.normalize(text, w.normalized, w.pre.regex); !st) return st;
    text = w.normalized;
  }
  if (normalized_matcher_.empty()) return encode_words(text, at_start, out, w);
  w.normalized_hits.clear();
  normalized_matcher_.find_all(text, w.normalized_hits);
  size_t at = 0;
  for (const AddedTokenMatcher::Match& m : w.normalized_hits) {
    if (m.start > at) {
      if (Status st = encode_words(text.substr(at, m.start - at), at_start && at == 0, out, w); !st)
        return st;
    }
    out.push_back(m.id);
    at = m.end;
  }
  if (at < text.size()) return encode_words(text.substr(at), at_start && at == 0, out, w);
  return {};
}

Status Tokenizer::encode_words(std::string_view text, bool at_start, std::vector<uint32_t>& out,
                               Work& w) const {
  if (fast_split_) {
    for (size_t i = 0; i < text.size();) {
      const size_t e = next_piece(*fast_split_, text, i);
      bpe_.encode_word(text.substr(i, e - i), out);
      i = e;
    }
    return {};
  }
  w.pieces.clear();
  if (Status st = pre_.run(text, at_start, w.pre, w.pieces); !st) return st;
  for (const Piece& p : w.pieces) bpe_.encode_word(p.text, out);
  return {};
}

Result<std::string> Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special) const {
  const bool byte_level_only = decoder_.is_byte_level_only() && bpe_.byte_level();
  std::string bytes;
  std::vector<std::string> tokens;
  for (uint32_t id : ids) {
    if (id < added_by_id_.size() && added_by_id_[id] >= 0) {
      const AddedToken& t = added_[static_cast<size_t>(added_by_id_[id])];
      if (skip_special && t.special) continue;
      if (byte_level_only) {
        auto raw = byte_level_decode(t.content);
        bytes += raw ? *raw : t.content;
      } else {
        tokens.push_back(t.content);
      }
      continue;
    }
    std::string_view b = bpe_.token_bytes(id);
    if (b.empty()) return Error("decode: unknown token id " + std::to_string(id));
    if (byte_level_only) {
      bytes += b;  // an unreachable entry's text is its own bytes, as the decoder takes it
    } else {
      tokens.push_back(bpe_.byte_level() && !bpe_.unreachable(id) ? byte_level_encode(b)
                                                                  : std::string(b));
    }
  }
  if (byte_level_only) return utf8_lossy(bytes);
  Regex::Scratch scratch;
  return decoder_.decode(std::move(tokens), scratch);
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view text) const {
  for (const AddedToken& t : added_)
    if (t.content == text) return t.id;
  const int64_t id = bpe_.token_id(text);
  if (id >= 0) return static_cast<uint32_t>(id);
  return std::nullopt;
}

size_t Tokenizer::vocab_size() const {
  size_t extra = 0;
  for (const AddedToken& t : added_)
    if (bpe_.token_bytes(t.id).empty()) ++extra;
  return bpe_.vocab_size() + extra;
}

size_t Tokenizer::memory_bytes() const {
  size_t n = bpe_.memory_bytes() + added_by_id_.capacity() * sizeof(int32_t) +
             raw_matcher_.memory_bytes() + normalized_matcher_.memory_bytes() +
             normalizer_.memory_bytes() + pre_.memory_bytes() + decoder_.memory_bytes() +
             (post_prefix_.capacity() + post_suffix_.capacity()) * sizeof(uint32_t);
  for (const AddedToken& t : added_) n += sizeof(AddedToken) + t.content.capacity();
  return n;
}

}  // namespace kvgate::tokenizer

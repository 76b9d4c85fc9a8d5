#include "core/tokenizer/tokenizer.h"

#include "core/tokenizer/unicode.h"

namespace kvgate::tokenizer {

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
  size_t at = 0;
  while (at < text.size()) {
    auto m = raw_matcher_.find(text, at);
    const size_t gap_end = m ? m->start : text.size();
    if (gap_end > at) encode_normalized(text.substr(at, gap_end - at), out);
    if (!m) break;
    out.push_back(m->id);
    if (boundaries) boundaries->push_back(Boundary{m->end, out.size() - base});
    at = m->end;
  }
  return {};
}

Status Tokenizer::find_boundaries(std::string_view text, std::vector<Boundary>& out) const {
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    return Error("invalid UTF-8 at byte " + std::to_string(bad) + " of the text");
  size_t at = 0;
  while (auto m = raw_matcher_.find(text, at)) {
    out.push_back(Boundary{m->end, 0});
    at = m->end;
  }
  return {};
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<uint32_t>& out) const {
  std::string normalized;
  if (nfc_) {
    nfc(text, normalized);
    text = normalized;
  }
  size_t at = 0;
  while (at < text.size()) {
    auto m = normalized_matcher_.find(text, at);
    const size_t gap_end = m ? m->start : text.size();
    if (gap_end > at) encode_pieces(text.substr(at, gap_end - at), out);
    if (!m) break;
    out.push_back(m->id);
    at = m->end;
  }
}

void Tokenizer::encode_pieces(std::string_view text, std::vector<uint32_t>& out) const {
  for (size_t i = 0; i < text.size();) {
    const size_t e = next_piece(split_, text, i);
    bpe_.encode_word(text.substr(i, e - i), out);
    i = e;
  }
}

Result<std::string> Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special) const {
  std::string bytes;
  for (uint32_t id : ids) {
    if (id < added_by_id_.size() && added_by_id_[id] >= 0) {
      const AddedToken& t = added_[static_cast<size_t>(added_by_id_[id])];
      if (!(skip_special && t.special)) bytes += t.content;
      continue;
    }
    std::string_view b = bpe_.token_bytes(id);
    if (b.empty()) return Error("decode: unknown token id " + std::to_string(id));
    bytes += b;
  }
  return utf8_lossy(bytes);
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
  size_t n = bpe_.memory_bytes() + added_by_id_.capacity() * sizeof(int32_t);
  for (const AddedToken& t : added_) n += sizeof(AddedToken) + t.content.capacity();
  return n;
}

}  // namespace kvgate::tokenizer

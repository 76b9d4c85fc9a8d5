// TextPieces: a short text (an HTTP head) built from pieces in one pass. The pieces are
// gathered as views, the string is sized once (its capacity kept from one use to the
// next) and each piece copied in, where std::string::append checks size and capacity
// again for every piece (about 35 instructions each; a head is 10 to 30 pieces).
//
//   using namespace std::string_view_literals;
//   TextPieces<24> head;
//   head << method << " "sv << target << " HTTP/1.1\r\n"sv;
//   head.write_to(out);  // `out` holds the text; what it held is replaced
//
// The views must stay valid until write_to. Any number of pieces is right: past N they
// go through a string of the builder's own (appends), so only the first N are quick.
//
// assign_text(s, v) replaces `s` by `v` the same way: one resize (no reallocation when
// `s` has the room, as a reused string does) and one copy. `v` must not view `s`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/common/short_bytes.h"

namespace kvgate::io {

inline void assign_text(std::string& s, std::string_view v) {
  s.resize(v.size());
  if (!v.empty()) std::memcpy(s.data(), v.data(), v.size());
}

template <size_t N>
class TextPieces {
 public:
  TextPieces() = default;
  TextPieces(const TextPieces&) = delete;
  TextPieces& operator=(const TextPieces&) = delete;

  [[gnu::always_inline]] TextPieces& operator<<(std::string_view s) {
    if (count_ == N) [[unlikely]] {
      spill();
    }
    pieces_[count_++] = Piece{s.data(), s.size()};
    size_ += s.size();
    return *this;
  }

  void write_to(std::string& out) const {
    out.resize(spilled_.size() + size_);
    char* p = out.data();
    if (!spilled_.empty()) [[unlikely]] {
      std::memcpy(p, spilled_.data(), spilled_.size());
      p += spilled_.size();
    }
    for (size_t i = 0; i < count_; ++i) p = put(p, pieces_[i].data, pieces_[i].size);
  }

 private:
  // Trivial, so that the array costs nothing until a piece is put in it.
  struct Piece {
    const char* data;
    size_t size;
  };

  // A head's pieces are mostly a few bytes to a few dozen: copied without a call
  // (copy_short).
  static char* put(char* to, const char* from, size_t n) { return copy_short(to, from, n); }

  void spill() {
    for (size_t i = 0; i < count_; ++i) spilled_.append(pieces_[i].data, pieces_[i].size);
    count_ = 0;
    size_ = 0;
  }

  Piece pieces_[N];
  size_t count_ = 0;
  size_t size_ = 0;  // of the pieces in pieces_
  std::string spilled_;
};

}  // namespace kvgate::io

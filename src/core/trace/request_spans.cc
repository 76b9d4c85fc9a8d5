#include "core/trace/request_spans.h"

#include <cstring>

namespace kvgate::trace {

TextRef TextBuffer::add(std::string_view s) {
  const TextRef ref{size_, static_cast<uint32_t>(s.size())};
  if (s.empty()) return ref;
  if (!on_heap_ && size_ + s.size() <= kInline) {
    std::memcpy(inline_ + size_, s.data(), s.size());
  } else {
    if (!on_heap_) {
      heap_.reserve(2 * (size_ + s.size()));
      heap_.assign(inline_, size_);
      on_heap_ = true;
    }
    heap_.append(s);
  }
  size_ += ref.size;
  return ref;
}

}  // namespace kvgate::trace

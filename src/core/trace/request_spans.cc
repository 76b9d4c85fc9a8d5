#include "core/trace/request_spans.h"

#include <cstring>

namespace kvgate::trace {

TextRef TextBuffer::add_on_heap(std::string_view s) {
  const TextRef ref{size_, static_cast<uint32_t>(s.size())};
  if (!on_heap_) {
    heap_.reserve(2 * (size_ + s.size()));
    heap_.assign(inline_, size_);
    on_heap_ = true;
  }
  heap_.append(s);
  size_ += ref.size;
  return ref;
}

void RequestSpans::clear() {
  trace_id = {};
  span_id = 0;
  parent_span_id = 0;
  trace_flags = kSampledFlag;
  trace_state = {};
  start_unix_nanos = 0;
  end_unix_nanos = 0;
  model.reset();
  pool.reset();
  path.reset();
  routing.reset();
  endpoint = {};
  http_status = 0;
  hops_started = 0;
  hops.clear();
  text.clear();
}

}  // namespace kvgate::trace

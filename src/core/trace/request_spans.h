// RequestSpans: one traced request's spans as the gateway records them, in one compact
// record: its server span (`kvgate.request`, kind SERVER) with the attributes
// docs/tracing.md lists as typed fields, and one client span per upstream hop. It is the
// unit of export: the gateway fills it on the request's path and queues it once, when
// the request ends; the exporter encodes it straight from these fields
// (otlp_json.h, append_otlp_json), into the same JSON as the Span records of span.h.
//
// Nothing in it allocates while it fits: span names are literals' views; the strings it
// keeps (the client's tracestate, the model, pool and path, endpoint URLs, a failed hop's
// error) are copied into one buffer inside it (TextBuffer, kInline bytes, then the heap);
// the first HopList::kInline hops are kept inline (then a vector).
//
//   RequestSpans r;
//   r.trace_id = server.trace_id;
//   r.span_id = server.span_id;
//   r.pool = r.text.add("chat");
//   r.hops.push_back({.span_id = hop_id, .name = "kvgate.upstream",
//                     .endpoint = r.text.add(url), .start_unix_nanos = t0,
//                     .end_unix_nanos = t1, .attempt = 0, .status = 200});
//
// A plain value: copy or move it freely (its views into `text` are offsets, valid in a
// copy). clear() makes it as new for reuse (the gateway recycles its records), keeping the
// heap room its text and hops grew (up to a bound) so that a reused record does not
// allocate again.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/common/short_bytes.h"
#include "core/trace/trace_context.h"

namespace kvgate::trace {

// A string kept in a TextBuffer: where it is.
struct TextRef {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// Strings copied into one buffer: inline while they fit in kInline bytes together, then on
// the heap (what was inline is moved there once). A TextRef stays valid as it grows.
//
// The inline bytes are not initialised (a record is made for every traced request): only
// the first size_ of them are ever read, and a copy copies those.
class TextBuffer {
 public:
  static constexpr size_t kInline = 192;

  TextBuffer() = default;
  TextBuffer(const TextBuffer& other) { *this = other; }
  TextBuffer& operator=(const TextBuffer& other) {
    if (this != &other) {
      size_ = other.size_;
      on_heap_ = other.on_heap_;
      if (on_heap_) {
        heap_ = other.heap_;
      } else {
        std::memcpy(inline_, other.inline_, size_);
      }
    }
    return *this;
  }

  // Room on the heap clear() keeps; more is given back.
  static constexpr size_t kKeptHeap = 4096;

  // `s` appended; where it is in the buffer. Inline while the strings fit kInline (every
  // request's usual few): a copy; past it, add_on_heap.
  TextRef add(std::string_view s) {
    const TextRef ref{size_, static_cast<uint32_t>(s.size())};
    if (on_heap_ || size_ + s.size() > kInline) return add_on_heap(s);
    copy_short(inline_ + size_, s.data(), s.size());  // (nothing read when empty)
    size_ += ref.size;
    return ref;
  }
  // Whether the strings are on the heap (they outgrew kInline).
  bool on_heap() const { return on_heap_; }
  std::string_view view(TextRef r) const {
    return {(on_heap_ ? heap_.data() : inline_) + r.offset, r.size};
  }

  // Empty, as new (its strings inline again until they outgrow kInline), the heap
  // string's room kept up to kKeptHeap bytes for when they do.
  void clear() {
    size_ = 0;
    on_heap_ = false;
    if (heap_.capacity() > kKeptHeap) {
      std::string().swap(heap_);
    } else {
      heap_.clear();
    }
  }

 private:
  TextRef add_on_heap(std::string_view s);

  char inline_[kInline];  // the first size_ bytes, while !on_heap_
  uint32_t size_ = 0;
  bool on_heap_ = false;
  std::string heap_;  // everything, once on_heap_
};

// An endpoint URL's host and port, as a client span's `server.address` and `server.port`
// carry them (OpenTelemetry's HTTP conventions: the host name or IP address alone, an IPv6
// one without its brackets; the port a number): "http://10.0.0.1:8000" is "10.0.0.1" and
// 8000. Without a port in the URL, the scheme's (http 80, https 443; 0 for another scheme:
// no server.port). A URL that is not "scheme://authority..." (no "://") is taken as the
// authority itself. The host is a view into `url`.
struct ServerAddress {
  std::string_view host;
  int32_t port = 0;  // 0: none
};
ServerAddress server_address(std::string_view url);

// One upstream hop's client span (kind CLIENT, under the server span), once ended.
struct HopSpan {
  SpanId span_id = 0;
  // A literal's view ("kvgate.upstream", ...) that must need no JSON escape (json_plain,
  // json_cursor.h: ASCII from 0x20 to 0x7f, no quote, no backslash): the records' encoder
  // copies it as it is (asserted in debug builds).
  std::string_view name;
  TextRef endpoint;  // the endpoint's URL: server.address and server.port (server_address)
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  int32_t attempt = 0;  // kvgate.attempt: the hop's index within the request
  // http.response.status_code: the engine's answer; 0 when the exchange failed (`error`
  // says why). Not 1xx-4xx: the span's status is ERROR.
  int32_t status = 0;
  TextRef error;
};

// The hops of a request, in the order they ended: kInline inline, more in a vector. The
// inline slots are not initialised (nor constructed) until a hop is put there: only the
// first min(size_, kInline) are ever read, and a copy copies those.
class HopList {
 public:
  static constexpr size_t kInline = 3;
  // Hops past the inline ones whose room clear() keeps; more is given back.
  static constexpr size_t kKeptMore = 16;

  HopList() = default;
  HopList(const HopList& other) : more_(other.more_), size_(other.size_) { copy_inline(other); }
  HopList& operator=(const HopList& other) {
    if (this != &other) {
      more_ = other.more_;
      size_ = other.size_;
      copy_inline(other);
    }
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const HopSpan& operator[](size_t i) const {
    return i < kInline ? slots_[i].hop : more_[i - kInline];
  }
  // The last hop put (not empty).
  HopSpan& back() { return size_ <= kInline ? slots_[size_ - 1].hop : more_.back(); }
  void push_back(const HopSpan& hop) {
    if (size_ < kInline) {
      std::construct_at(&slots_[size_].hop, hop);
    } else {
      more_.push_back(hop);
    }
    ++size_;
  }
  // Empty, as new, the vector's room kept up to kKeptMore hops (nothing to destroy: a
  // HopSpan is trivially destructible).
  void clear() {
    size_ = 0;
    if (more_.capacity() > kKeptMore) {
      std::vector<HopSpan>().swap(more_);
    } else {
      more_.clear();
    }
  }

 private:
  static_assert(std::is_trivially_copyable_v<HopSpan> && std::is_trivially_destructible_v<HopSpan>);
  void copy_inline(const HopList& other) {
    for (size_t i = 0; i < std::min(size_, kInline); ++i) {
      std::construct_at(&slots_[i].hop, other.slots_[i].hop);
    }
  }

  // Room for a hop, not constructed until a hop is put there.
  union Slot {
    Slot() {}
    HopSpan hop;
  };
  Slot slots_[kInline];
  std::vector<HopSpan> more_;
  size_t size_ = 0;
};

// The routing decision's numbers, on the server span (its endpoint: RequestSpans::endpoint).
// A span carries what the decision had: the prefix terms only when the prompt was keyed
// (prompt_blocks not 0; a round-robin pool keys none), kvgate.queued_us only when the
// request waited in the pool's queue, kvgate.disaggregated only when true.
struct Routing {
  int64_t route_us = 0;        // kvgate.route_us
  int64_t matched_blocks = 0;  // kvgate.matched_blocks, when prompt_blocks is not 0
  int64_t cached_blocks = 0;   // kvgate.cached_blocks, when prompt_blocks is not 0
  int64_t prompt_blocks = 0;   // kvgate.prompt_blocks, when not 0
  int64_t prefill_tokens = 0;  // kvgate.prefill_tokens
  double cost = 0;             // kvgate.cost
  int64_t queued_us = 0;       // kvgate.queued_us, when not 0
  bool disaggregated = false;  // kvgate.disaggregated, when true
};

struct RequestSpans {
  // The server span.
  TraceId trace_id;
  SpanId span_id = 0;
  SpanId parent_span_id = 0;           // the client's span; 0: kvgate started the trace
  uint8_t trace_flags = kSampledFlag;  // the W3C trace flags, the hops' too
  TextRef trace_state;                 // the client's tracestate (empty: none), the hops' too
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  // Its attributes, in this order, those set: kvgate.model, kvgate.pool, url.path; the
  // first routing decision (kvgate.endpoint, then `routing`'s fields); then
  // http.response.status_code (when not 0) and kvgate.hops.
  std::optional<TextRef> model;
  std::optional<TextRef> pool;
  std::optional<TextRef> path;
  std::optional<Routing> routing;
  TextRef endpoint;  // with `routing`
  // The answer's HTTP status; 0 when none was given (no answer). 0 or 5xx: status ERROR.
  int32_t http_status = 0;
  // kvgate.hops: hops started, those that never ended included (they have no span).
  int32_t hops_started = 0;

  HopList hops;  // the ended hops' spans
  TextBuffer text;

  // Spans in the record: its hops, then the server span.
  size_t span_count() const { return hops.size() + 1; }
  // Whether its text or its hops grew on the heap (clear() gives back what is past their
  // bounds).
  bool spilled() const { return text.on_heap() || hops.size() > HopList::kInline; }

  // Every field as in a new record, what `hops` and `text` grew on the heap kept (up to
  // their bounds): a cleared record reads, copies and encodes as a new one. A field added
  // above must be reset here too.
  void clear();
};

}  // namespace kvgate::trace

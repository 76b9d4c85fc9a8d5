// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header a
// client sends or kvgate starts, its ids, and the sampling decision.
//
// `traceparent: 00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`. Version 00
// only is written; a higher version is read by its first four fields, as the spec asks
// (a parser must not reject a future version whose first 55 characters parse). Ids of
// all zeros, upper-case or non-hex digits, wrong lengths and version ff are invalid: the
// request is then traced as if it had no parent (the spec's "restart the trace").
//
// Pure: ids come from a generator the caller passes in (core/common/rng.h), the sampling
// decision from a uniform draw the caller makes.
//
//   std::optional<TraceParent> in = parse_traceparent(header);
//   if (sampled(in ? &*in : nullptr, config.ratio, rng.uniform())) {
//     TraceParent server = in ? child_of(*in, rng) : start_trace(rng);
//     request_header("traceparent", format_traceparent(child_of(server, rng)));
//   }
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/common/rng.h"

namespace kvgate::trace {

// 16 bytes, as two big-endian halves; all zeros is invalid.
struct TraceId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool valid() const { return hi != 0 || lo != 0; }
  bool operator==(const TraceId&) const = default;
};

// 8 bytes; zero is invalid (and means "no parent" in a span record).
using SpanId = uint64_t;

inline constexpr uint8_t kSampledFlag = 0x01;

// One traceparent: the trace, the span that is the receiver's parent, the flags.
struct TraceParent {
  TraceId trace_id;
  SpanId span_id = 0;
  uint8_t flags = 0;
  bool is_sampled() const { return (flags & kSampledFlag) != 0; }
  bool operator==(const TraceParent&) const = default;
};

// The header's value, or nullopt when it is not a valid traceparent (see above).
std::optional<TraceParent> parse_traceparent(std::string_view value);

// "00-<trace>-<span>-<flags>", lower-case hex, kTraceparentSize characters.
inline constexpr size_t kTraceparentSize = 55;
std::string format_traceparent(const TraceParent& p);
// The same, written at `out` (kTraceparentSize characters: a header's value, in place).
void write_traceparent(char* out, const TraceParent& p);

// Lower-case hex: 32 and 16 characters (the OTLP JSON encoding of ids too).
std::string to_hex(const TraceId& id);
std::string to_hex(SpanId id);
// The same, appended to `out` (the OTLP encoder's, without a string of their own).
void append_hex(std::string& out, const TraceId& id);
void append_hex(std::string& out, SpanId id);
// The 8 lower-case hex digits of `x`, most significant first, at `out`: each nibble is
// spread to a byte of its own (nibble k in byte k), turned into its digit ('0' + n, plus
// the gap to 'a' where n >= 10: bit 4 of n + 6) in all 8 bytes at once, and the bytes put
// in the order of the digits. Inline: the encoders write ids straight at their cursor.
inline void write_hex8(char* out, uint32_t x) {
  uint64_t y = x;
  y = (y | (y << 16)) & 0x0000ffff0000ffffULL;
  y = (y | (y << 8)) & 0x00ff00ff00ff00ffULL;
  y = (y | (y << 4)) & 0x0f0f0f0f0f0f0f0fULL;
  const uint64_t letters = ((y + 0x0606060606060606ULL) >> 4) & 0x0101010101010101ULL;
  y += 0x3030303030303030ULL + letters * static_cast<uint64_t>('a' - '0' - 10);
  // Byte k holds nibble k, the least significant first: the most significant digit goes
  // to the lowest address.
  if constexpr (std::endian::native == std::endian::little) y = __builtin_bswap64(y);
  std::memcpy(out, &y, sizeof y);
}
// The 16 lower-case hex digits of `v`, most significant first, at `out`. With SSE2 (every
// x86-64) in one register: the bytes most significant first, each byte's high and low
// nibble interleaved into bytes of their own, the gap to 'a' added where a nibble is
// above 9, one 16-byte store: about 12 instructions where write_hex8 twice takes 30.
inline void write_hex16(char* out, uint64_t v) {
#if defined(__SSE2__)
  const __m128i bytes = _mm_cvtsi64_si128(static_cast<long long>(__builtin_bswap64(v)));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m128i nibbles =
      _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low4), _mm_and_si128(bytes, low4));
  const __m128i letters =
      _mm_and_si128(_mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
  const __m128i digits = _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8('0')), letters);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), digits);
#else
  write_hex8(out, static_cast<uint32_t>(v >> 32));
  write_hex8(out + 8, static_cast<uint32_t>(v));
#endif
}

// Fresh ids from `rng`, never the invalid all-zero ones.
TraceId new_trace_id(Rng& rng);
SpanId new_span_id(Rng& rng);

// A new sampled trace: a fresh trace id and span id.
TraceParent start_trace(Rng& rng);
// A span under `parent`: same trace and flags, a fresh span id.
TraceParent child_of(const TraceParent& parent, Rng& rng);

// Whether a request is traced. With a parent, its sampled flag decides (the client's
// tracer chose; kvgate follows it, whatever its own ratio). Without one, a draw `u` in
// [0, 1) against `ratio` (0: never, 1: always).
bool sampled(const TraceParent* parent, double ratio, double u);

}  // namespace kvgate::trace

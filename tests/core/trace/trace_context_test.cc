#include "core/trace/trace_context.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace kvgate::trace {
// Named after the file, not anonymous: the tests compile in unity batches.
namespace trace_context_test {

constexpr std::string_view kExample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(Traceparent, ParsesTheSpecExample) {
  auto p = parse_traceparent(kExample);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->trace_id.hi, 0x4bf92f3577b34da6ULL);
  EXPECT_EQ(p->trace_id.lo, 0xa3ce929d0e0e4736ULL);
  EXPECT_EQ(p->span_id, 0x00f067aa0ba902b7ULL);
  EXPECT_EQ(p->flags, 1);
  EXPECT_TRUE(p->is_sampled());
  EXPECT_EQ(format_traceparent(*p), kExample);
}

TEST(Traceparent, UnsampledFlag) {
  auto p = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->is_sampled());
}

TEST(Traceparent, RejectsInvalidValues) {
  for (std::string_view bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",        // no flags
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",      // short flags
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",     // misplaced dash
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",     // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",     // zero parent id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",     // upper case
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",     // not hex
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",  // v00 with extra
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     // version ff
           "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     // bad version
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",     // wrong separator
       }) {
    EXPECT_FALSE(parse_traceparent(bad).has_value()) << bad;
  }
}

TEST(Traceparent, AcceptsAFutureVersionByItsFirstFields) {
  auto p = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->span_id, 0x00f067aa0ba902b7ULL);
  // Written back as version 00.
  EXPECT_EQ(format_traceparent(*p), kExample);
  EXPECT_FALSE(
      parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x").has_value());
}

TEST(TraceIds, FreshIdsAreValidAndDistinct) {
  Rng rng(7);
  const TraceParent a = start_trace(rng);
  const TraceParent b = child_of(a, rng);
  const TraceParent c = child_of(a, rng);
  EXPECT_TRUE(a.trace_id.valid());
  EXPECT_TRUE(a.is_sampled());
  EXPECT_NE(a.span_id, 0u);
  EXPECT_EQ(b.trace_id, a.trace_id);
  EXPECT_EQ(c.trace_id, a.trace_id);
  EXPECT_NE(b.span_id, a.span_id);
  EXPECT_NE(b.span_id, c.span_id);
  EXPECT_EQ(b.flags, a.flags);
  // What is formatted parses back to itself.
  EXPECT_EQ(parse_traceparent(format_traceparent(b)), b);
}

TEST(TraceIds, SameSeedSameIds) {
  Rng r1(42);
  Rng r2(42);
  EXPECT_EQ(new_trace_id(r1), new_trace_id(r2));
  EXPECT_EQ(new_span_id(r1), new_span_id(r2));
}

TEST(TraceIds, Hex) {
  EXPECT_EQ(to_hex(SpanId{0xab}), "00000000000000ab");
  EXPECT_EQ(to_hex(TraceId{1, 2}), "00000000000000010000000000000002");
  // Every digit, in every position (the digits are made 8 at a time).
  EXPECT_EQ(to_hex(SpanId{0x0123456789abcdefULL}), "0123456789abcdef");
  EXPECT_EQ(to_hex(SpanId{0xfedcba9876543210ULL}), "fedcba9876543210");
  EXPECT_EQ(to_hex(SpanId{~0ULL}), "ffffffffffffffff");
  EXPECT_EQ(to_hex(TraceId{0x9a0b1c2d3e4f5a6bULL, 0xa0b1c2d3e4f50617ULL}),
            "9a0b1c2d3e4f5a6ba0b1c2d3e4f50617");
  char out[kTraceparentSize];
  write_traceparent(out,
                    {{0x4bf92f3577b34da6ULL, 0xa3ce929d0e0e4736ULL}, 0x00f067aa0ba902b7ULL, 1});
  EXPECT_EQ(std::string_view(out, sizeof out), kExample);
}

TEST(TraceIds, HexOfRandomIdsIsPrintfs) {
  // write_hex16 (one register with SSE2) and write_hex8 twice (the portable path) against
  // the C library's, for ids of every shape.
  Rng rng(7);
  for (int i = 0; i < 10'000; ++i) {
    uint64_t v = rng.next();
    if (i % 4 == 1) v >>= (i % 64);              // leading zeros
    if (i % 4 == 2) v |= 0xa0a0a0a0a0a0a0a0ULL;  // letters in every high nibble
    char want[17];
    std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(v));
    char got[16];
    write_hex16(got, v);
    ASSERT_EQ(std::string_view(got, 16), std::string_view(want, 16)) << v;
    write_hex8(got, static_cast<uint32_t>(v >> 32));
    write_hex8(got + 8, static_cast<uint32_t>(v));
    ASSERT_EQ(std::string_view(got, 16), std::string_view(want, 16)) << v;
  }
}

TEST(Sampling, ParentDecides) {
  TraceParent on{{1, 2}, 3, kSampledFlag};
  TraceParent off{{1, 2}, 3, 0};
  EXPECT_TRUE(sampled(&on, 0.0, 0.99));
  EXPECT_FALSE(sampled(&off, 1.0, 0.0));
}

TEST(Sampling, RatioWithoutParent) {
  EXPECT_FALSE(sampled(nullptr, 0.0, 0.0));
  EXPECT_TRUE(sampled(nullptr, 1.0, 0.999999));
  EXPECT_TRUE(sampled(nullptr, 0.25, 0.2));
  EXPECT_FALSE(sampled(nullptr, 0.25, 0.3));
  Rng rng(1);
  int n = 0;
  for (int i = 0; i < 10'000; ++i) {
    if (sampled(nullptr, 0.1, rng.uniform())) ++n;
  }
  EXPECT_GT(n, 800);
  EXPECT_LT(n, 1200);
}

}  // namespace trace_context_test
}  // namespace kvgate::trace

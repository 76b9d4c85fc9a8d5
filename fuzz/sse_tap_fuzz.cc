// The SSE usage tap (openai/sse_tap.h) on an engine's stream: fed in one piece or in the
// small pieces the network delivers, it must forward the same bytes, count the same
// token events and read the same usage; what it forwards is what came in, less at most
// the usage-only chunk it strips, and nothing is held past an event's end.
#include <string>

#include "fuzz/fuzz_support.h"
#include "openai/sse_tap.h"

namespace {

using namespace kvgate;
using kvgate::openai::SseTap;

struct Seen {
  std::string out;
  size_t token_events = 0;
  size_t done = 0;
  size_t pending = 0;
  openai::Usage usage;
  bool error = false;
};

std::string show(const Seen& s) {
  return "tokens " + std::to_string(s.token_events) + " done " + std::to_string(s.done > 0) +
         " pending " + std::to_string(s.pending) + " usage " + std::to_string(s.usage.seen) + "/" +
         std::to_string(s.usage.prompt_tokens) + "/" + std::to_string(s.usage.completion_tokens) +
         "/" + std::to_string(s.usage.cached_tokens) + " error " + std::to_string(s.error) +
         "\nout [" + s.out + "]";
}

Seen run(const std::vector<std::string_view>& in, bool strip) {
  SseTap tap(strip);
  Seen s;
  for (std::string_view piece : in) {
    const SseTap::Step step = tap.feed(piece, s.out);
    s.token_events += step.token_events;
    s.done += step.done;
  }
  s.pending = tap.pending();
  s.usage = tap.usage();
  s.error = tap.saw_error();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool strip = data[0] & 1;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Seen whole = run({in}, strip);
  const Seen split = run(fuzz::pieces(in), strip);
  KVGATE_FUZZ_CHECK(show(whole) == show(split),
                    "one piece:\n" + show(whole) + "\nin pieces:\n" + show(split));
  KVGATE_FUZZ_CHECK(whole.out.size() + whole.pending <= in.size(), show(whole));
  if (!strip) {
    KVGATE_FUZZ_CHECK(whole.out.size() + whole.pending == in.size(), show(whole));
    KVGATE_FUZZ_CHECK(in.substr(0, whole.out.size()) == whole.out, show(whole));
  }
  return 0;
}

// StreamReader: reads a streamed OpenAI answer (SSE) on the client's side, as the load
// generator measures it.
//
// Bytes go in as they arrive; each complete event's `data:` lines are read as chunks.
// Content is counted per choice that carries non-empty text (`text`, or `delta.content`
// on chat), so the role-only first chunk of a chat stream is not a token;
// the usage chunk's counts are kept (the last one wins), and `data: [DONE]` ends the
// stream. Carriage returns are dropped, so CRLF streams read as LF ones.
//
//   StreamReader reader;
//   if (reader.feed(bytes) > 0 && first_token < 0) first_token = now;
//   ... reader.done(), reader.usage(), reader.content_chunks()
//
// Not thread-safe (one per stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "openai/usage.h"

namespace kvgate::openai {

class StreamReader {
 public:
  // Reads the events `bytes` completes; returns the content they carried (choices with
  // text).
  size_t feed(std::string_view bytes);

  // `data: [DONE]` has been read.
  bool done() const { return done_; }
  // Choices with text read so far.
  uint64_t content_chunks() const { return content_chunks_; }
  // The last usage chunk's counts (seen false while there was none).
  const Usage& usage() const { return usage_; }

 private:
  // One `data:` payload; returns its choices with text.
  size_t on_data(std::string_view data);

  std::string buf_;  // bytes of an unfinished event
  uint64_t content_chunks_ = 0;
  Usage usage_;
  bool done_ = false;
};

}  // namespace kvgate::openai

// Mooncake trace records: one JSON object per line, as Moonshot published them
// (github.com/kvcache-ai/Mooncake, FAST'25 traces):
//   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
// `timestamp` is milliseconds from the trace start; each hash id names one block of 512
// tokens of content, so two requests share a prefix exactly as long as their hash_ids do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"

namespace kvgate::workload {

struct TraceRecord {
  int64_t timestamp_ms = 0;
  uint32_t input_length = 0;
  uint32_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

// Parses one line; an error names what is wrong with it.
Result<TraceRecord> parse_trace_line(std::string_view line);

// Parses a whole trace's text (blank lines skipped), stopping after `max_records` if > 0;
// an error names the line as `name`:line. Records are sorted by timestamp (stable) so a
// shuffled file still replays in order.
Result<std::vector<TraceRecord>> parse_trace(std::string_view text, const std::string& name,
                                             uint64_t max_records);

}  // namespace kvgate::workload

// The full-parse readers of OpenAI bodies: Boost.JSON builds the whole tree, then the
// fields are read from it.
//
// They define the behaviour of inspect_request (request.h) and parse_usage
// (usage.h): those scan the body without a tree (json_scan.h) and come here whenever
// the body is anything but plain valid JSON of the expected shape — every bad request,
// every malformed response, every corner the scanner does not vouch for — so the answers
// (fields, error status, message and param) are these exactly. Tests and
// bench/openai_json_bench.cc compare the fast paths against them.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string_view>

#include "openai/request.h"
#include "openai/usage.h"

namespace kvgate::openai::dom {

Inspection inspect_request(std::string_view body, ApiKind kind);
Usage parse_usage(std::string_view json_text);
// A token count field of `o`: missing, or not a non-negative integer, reads 0 (every
// usage reader's rule: OpenAI's, Anthropic's, the Responses API's).
uint64_t count(const boost::json::object& o, std::string_view key);

}  // namespace kvgate::openai::dom

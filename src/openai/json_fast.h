// The fast paths of inspect_request (request.h) and parse_usage (usage.h): one
// pass over the body with JsonScanner (json_scan.h), no tree, no allocation beyond the
// strings they return.
//
// Each answers only when it is sure to give what the full parse (json_dom.h)
// gives: true with the result for a body that is plain valid JSON of the expected shape
// (and, for a request, passes every check); false for anything else — every bad
// request, malformed text, a repeated key the answer depends on, whatever the scanner
// does not vouch for — and the caller then asks the full parse, which decides.
//
//   InspectedRequest r;
//   Inspection i = fast::inspect_request(body, kind, r) ? Inspection{{}, r}
//                                                       : dom::inspect_request(body, kind);
#pragma once

#include <string_view>

#include "openai/request.h"
#include "openai/usage.h"

namespace kvgate::openai::fast {

// REQUIRES: `request` default-constructed. Partly filled when false.
bool inspect_request(std::string_view body, ApiKind kind, InspectedRequest& request);

// The top-level `usage` of `json_text` (a repeated key: the last, as the full parse).
bool parse_usage(std::string_view json_text, Usage& usage);

}  // namespace kvgate::openai::fast

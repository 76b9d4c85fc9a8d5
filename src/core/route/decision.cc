#include "core/route/decision.h"

namespace kvgate::route {

std::string_view to_string(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "ok";
    case RejectReason::kNoEndpoints:
      return "no_endpoints";
    case RejectReason::kNoHealthyEndpoints:
      return "no_healthy_endpoints";
    case RejectReason::kSaturated:
      return "saturated";
    case RejectReason::kNoPrefillEndpoint:
      return "no_prefill_endpoint";
    case RejectReason::kNoDecodeEndpoint:
      return "no_decode_endpoint";
    case RejectReason::kDecodeFull:
      return "decode_full";
    case RejectReason::kDuplicateRequest:
      return "duplicate_request";
    case RejectReason::kSloUnattainable:
      return "slo_unattainable";
  }
  return "unknown";
}

std::string_view to_string(SessionOutcome outcome) {
  switch (outcome) {
    case SessionOutcome::kNone:
      return "none";
    case SessionOutcome::kNew:
      return "new";
    case SessionOutcome::kKept:
      return "kept";
    case SessionOutcome::kMovedLoad:
      return "moved_load";
    case SessionOutcome::kMovedUnavailable:
      return "moved_unavailable";
    case SessionOutcome::kMovedTarget:
      return "moved_target";
  }
  return "unknown";
}

int http_status(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return 200;
    case RejectReason::kSaturated:
    case RejectReason::kDecodeFull:
    case RejectReason::kSloUnattainable:
      return 429;
    case RejectReason::kDuplicateRequest:
      return 409;
    case RejectReason::kNoEndpoints:
    case RejectReason::kNoHealthyEndpoints:
    case RejectReason::kNoPrefillEndpoint:
    case RejectReason::kNoDecodeEndpoint:
      return 503;
  }
  return 503;
}

}  // namespace kvgate::route

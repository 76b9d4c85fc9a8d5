// The admin API's request bodies (gateway/control/admin_json.h) on arbitrary bytes: the first
// byte picks the body (an endpoint to add, with or without kv_events_bind; a policy PATCH
// or PUT), the rest is the body. Each either refuses it with a message or gives a value
// that holds the invariants the admin API relies on: an added endpoint has a parseable
// http:// URL; a policy result passes the router config's validate().
#include <string>

#include "core/route/config.h"
#include "fuzz/fuzz_support.h"
#include "gateway/control/admin_json.h"
#include "io/http_types.h"

using namespace kvgate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0] % 4;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (pick < 2) {
    const bool bind = pick == 1;
    const Result<gateway::AddEndpointRequest> r = gateway::parse_add_endpoint(body, bind);
    if (!r) {
      KVGATE_FUZZ_CHECK(!r.error().empty(), "an error without a message");
      return 0;
    }
    KVGATE_FUZZ_CHECK(static_cast<bool>(io::parse_url(r->spec.url)),
                      "accepted an endpoint whose URL does not parse: " + r->spec.url);
    if (bind && r->kv_events) {
      KVGATE_FUZZ_CHECK(!r->kv_events->topic.empty(), "bind mode without a topic");
    }
    return 0;
  }
  const route::RouterConfig current;
  const Result<route::RouterConfig> next =
      gateway::apply_policy_body(current, body, /*replace=*/pick == 3);
  if (!next) {
    KVGATE_FUZZ_CHECK(!next.error().empty(), "an error without a message");
    return 0;
  }
  const Status valid = next->validate();
  KVGATE_FUZZ_CHECK(valid.ok(), "apply_policy_body gave a config validate() refuses: " +
                                    (valid.ok() ? std::string() : valid.error()));
  (void)gateway::router_config_json(*next);  // what GET .../policy then shows
  return 0;
}

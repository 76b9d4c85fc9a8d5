// The gateway's YAML config (gateway/common/config.h) and keys file (gateway/data/keys.h) loaders
// on arbitrary text: either a config, or an error that names the file (and, when YAML knows it, the
// line), never a crash or an exception that escapes. The first byte picks the loader.
#include <string>

#include "fuzz/fuzz_support.h"
#include "gateway/common/config.h"
#include "gateway/data/keys.h"

using namespace kvgate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view yaml(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    const Result<gateway::KeyStore> keys = gateway::KeyStore::parse(yaml, "keys.yaml");
    if (!keys) {
      KVGATE_FUZZ_CHECK(keys.error().starts_with("keys.yaml"), keys.error());
      return 0;
    }
    // A key is only ever compared by its hash: nothing matches a key never issued.
    KVGATE_FUZZ_CHECK(keys->authenticate_header("Bearer not-a-key") == nullptr, "matched");
    KVGATE_FUZZ_CHECK(keys->authenticate_header(std::string(yaml)) == nullptr || keys->size() > 0,
                      "matched without keys");
    return 0;
  }
  const Result<gateway::GatewayConfig> config = gateway::parse_gateway_config(yaml, "fuzz.yaml");
  if (!config) KVGATE_FUZZ_CHECK(config.error().starts_with("fuzz.yaml"), config.error());
  return 0;
}

#include "gateway/data/keys.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/common/yaml_reader.h"
#include "env/file.h"
#include "io/ascii.h"

namespace kvgate::gateway {
namespace {

std::optional<KeyDigest> from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  KeyDigest d{};
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

}  // namespace

bool Tenant::allows(std::string_view model) const {
  if (models.empty()) return true;
  for (const std::string& m : models) {
    if (m == model) return true;
  }
  return false;
}

KeyDigest sha256(std::string_view data) {
  KeyDigest d{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  return d;
}

std::string to_hex(const KeyDigest& digest) {
  std::string out;
  out.reserve(64);
  for (uint8_t b : digest) out += fmt::format("{:02x}", b);
  return out;
}

Result<std::string> generate_key() {
  uint8_t bytes[24];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Error("RAND_bytes failed");
  std::string key = "kvg-";
  for (uint8_t b : bytes) key += fmt::format("{:02x}", b);
  OPENSSL_cleanse(bytes, sizeof bytes);
  return key;
}

Result<KeyStore> KeyStore::parse(std::string_view yaml, std::string_view file) {
  KeyStore store;
  const YamlReader y(file);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return store;  // an empty file: no keys yet
    if (!root.IsMap() || !root["keys"]) {
      // No place: the error is about the file as a whole.
      return y.error(YAML::Node(), "keys", "expected a mapping with a 'keys' list");
    }
    YAML::Node keys = root["keys"];
    if (keys.IsNull()) return store;
    if (!keys.IsSequence()) return y.error(keys, "keys", "expected a list");
    for (size_t i = 0; i < keys.size(); ++i) {
      const YAML::Node& k = keys[i];
      std::string field = fmt::format("keys[{}]", i);
      if (!k.IsMap()) return y.error(k, field, "expected a mapping");
      for (const auto& kv : k) {
        std::string name = kv.first.as<std::string>();
        if (name != "sha256" && name != "tenant" && name != "models" && name != "priority" &&
            name != "may_set_priority" && name != "limits" && name != "weight" &&
            name != "deadline_ms" && name != "ttft_ms" && name != "tpot_ms") {
          return y.error(kv.first, field + "." + name, "unknown field");
        }
      }
      Entry e;
      if (!k["sha256"] || !k["sha256"].IsScalar()) {
        return y.error(k, field + ".sha256", "missing");
      }
      auto digest = from_hex(k["sha256"].Scalar());
      if (!digest) {
        return y.error(k["sha256"], field + ".sha256", "expected 64 hex digits");
      }
      e.digest = *digest;
      if (!k["tenant"] || !k["tenant"].IsScalar() || k["tenant"].Scalar().empty()) {
        return y.error(k, field + ".tenant", "missing");
      }
      e.tenant.name = k["tenant"].Scalar();
      if (auto m = k["models"]) {
        if (!m.IsSequence()) {
          return y.error(m, field + ".models", "expected a list");
        }
        for (const auto& x : m) e.tenant.models.push_back(x.as<std::string>());
      }
      if (auto p = k["priority"]) e.tenant.priority = p.as<int>();
      if (auto p = k["may_set_priority"]) e.tenant.may_set_priority = p.as<bool>();
      if (auto w = k["weight"]) {
        double v = 0;
        if (!w.IsScalar() || !YAML::convert<double>::decode(w, v) || !(v > 0) || v > 1e6) {
          return y.error(w, field + ".weight", "expected a number > 0");
        }
        e.tenant.weight = v;
      }
      if (auto d = k["deadline_ms"]) {
        int64_t v = 0;
        if (!d.IsScalar() || !YAML::convert<int64_t>::decode(d, v) || v < 0) {
          return y.error(d, field + ".deadline_ms", "expected milliseconds >= 0");
        }
        e.tenant.deadline_ms = v;
      }
      for (const char* name : {"ttft_ms", "tpot_ms"}) {
        if (auto d = k[name]) {
          int64_t v = 0;
          if (!d.IsScalar() || !YAML::convert<int64_t>::decode(d, v) || v < 0 || v > 86'400'000) {
            return y.error(d, field + "." + name, "expected milliseconds >= 0 (at most a day)");
          }
          (name[1] == 't' ? e.tenant.ttft_ms : e.tenant.tpot_ms) = v;
        }
      }
      if (auto l = k["limits"]) {
        if (!l.IsMap()) {
          return y.error(l, field + ".limits", "expected a mapping");
        }
        for (const auto& kv : l) {
          std::string name = kv.first.as<std::string>();
          if (name == "tokens_per_minute") {
            e.tenant.limits.tokens_per_minute = kv.second.as<uint64_t>();
          } else if (name == "requests_per_minute") {
            e.tenant.limits.requests_per_minute = kv.second.as<uint64_t>();
          } else if (name == "prompt_weight" || name == "completion_weight") {
            const double w = kv.second.as<double>();
            if (!(w >= 0)) {
              return y.error(kv.second, field + ".limits." + name, "expected a number >= 0");
            }
            (name == "prompt_weight" ? e.tenant.limits.prompt_weight
                                     : e.tenant.limits.completion_weight) = w;
          } else if (name == "models") {
            if (!kv.second.IsMap()) {
              return y.error(kv.second, field + ".limits.models",
                             "expected a mapping of model names");
            }
            for (const auto& m : kv.second) {
              ModelLimits ml{.model = m.first.as<std::string>()};
              const std::string mfield = field + ".limits.models." + ml.model;
              if (!m.second.IsMap()) {
                return y.error(m.second, mfield, "expected a mapping");
              }
              for (const auto& f : m.second) {
                const std::string fname = f.first.as<std::string>();
                if (fname == "tokens_per_minute") {
                  ml.tokens_per_minute = f.second.as<uint64_t>();
                } else if (fname == "requests_per_minute") {
                  ml.requests_per_minute = f.second.as<uint64_t>();
                } else {
                  return y.error(f.first, mfield + "." + fname, "unknown field");
                }
              }
              e.tenant.limits.models.push_back(std::move(ml));
            }
          } else {
            return y.error(kv.first, field + ".limits." + name, "unknown field");
          }
        }
      }
      store.entries_.push_back(std::move(e));
    }
  } catch (const YAML::Exception& e) {
    return y.error(e);
  }
  return store;
}

Result<KeyStore> KeyStore::load(const std::string& file) {
  Result<std::string> text = env::read_file(file);
  if (!text) return Error(text.error());
  return parse(*text, file);
}

std::vector<const Tenant*> KeyStore::tenants() const {
  std::vector<const Tenant*> out;
  for (const Entry& e : entries_) {
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [&](const Tenant* t) { return t->name == e.tenant.name; });
    if (!seen) out.push_back(&e.tenant);
  }
  return out;
}

const Tenant* KeyStore::authenticate(std::string_view key) const {
  if (key.empty()) return nullptr;
  KeyDigest d = sha256(key);
  const Tenant* found = nullptr;
  // Every entry is compared, matched or not, so the time does not depend on which one.
  for (const Entry& e : entries_) {
    bool equal = CRYPTO_memcmp(d.data(), e.digest.data(), d.size()) == 0;
    if (equal && found == nullptr) found = &e.tenant;
  }
  return found;
}

const Tenant* KeyStore::authenticate_header(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || !io::istarts_with(authorization, kBearer)) {
    return nullptr;
  }
  std::string_view key = authorization.substr(kBearer.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
  return authenticate(key);
}

}  // namespace kvgate::gateway

// The request path's calls into the control plane, as interfaces the data plane declares
// and the control plane implements: the data plane's library does not know the control
// plane's (docs/architecture.md, "The gateway's folders: its planes"). The gateway's
// wiring (Gateway::start, gateway/gateway.cc) hands each pool's implementations to the
// data plane (DataPlane::hooks, gateway/data/data_plane.h) before traffic starts.
//
//   AdapterPlacement  a pool's LoRA placement (gateway/control/lora_placer.h, LoraPlacer):
//                     a request for an adapter counts as its demand and may wait while
//                     the adapter is loaded on no endpoint
//   PromptObserver    a pool's warm-up (gateway/control/warmup.h, PoolWarmup): each
//                     routed prompt's blocks, its hot prefixes
//
// One virtual call per request and hook, no allocation beyond what the implementation's
// own call makes. Thread-safety: every call from any I/O thread (the implementations'
// contracts). The implementations are owned by the gateway and outlive the coroutines
// that call them (the gateway stops its io_context first).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/kv/block_hash.h"
#include "core/route/endpoint.h"

namespace kvgate::gateway {

class AdapterPlacement {
 public:
  // A request for `adapter` reached the pool: counted, and when the adapter is loaded
  // nowhere, completes once it is (or after the pool's max wait: the router then
  // decides as it can).
  virtual boost::asio::awaitable<void> arrive(std::string adapter) = 0;
  // A request for `adapter` was routed to `endpoint`.
  virtual void routed(route::EndpointId endpoint, std::string_view adapter) = 0;

 protected:
  ~AdapterPlacement() = default;
};

class PromptObserver {
 public:
  // Whether observe() keeps anything (the request path then asks for the prompt's token
  // ids).
  virtual bool enabled() const = 0;
  // One routed prompt: its block keys, the real tokens they were hashed from (or empty;
  // then `text`, a completion's prompt, or empty: not trackable).
  virtual void observe(std::span<const kv::BlockKey> keys, std::span<const kv::TokenId> token_ids,
                       std::string_view text) = 0;

 protected:
  ~PromptObserver() = default;
};

// One pool's hooks; a null one is a pool without that feature.
struct PoolHooks {
  AdapterPlacement* lora = nullptr;
  PromptObserver* warmup = nullptr;
};

}  // namespace kvgate::gateway

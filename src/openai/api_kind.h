// ApiKind: which of OpenAI's two text APIs a body belongs to, /v1/chat/completions or
// /v1/completions. The gateway, the engine simulator and the load generator all name it
// with this one type.
#pragma once

#include <cstdint>

namespace kvgate::openai {

enum class ApiKind : uint8_t { kChat, kCompletion };

}  // namespace kvgate::openai

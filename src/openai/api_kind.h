// ApiKind: which of OpenAI's two text APIs a body belongs to, /v1/chat/completions or
// /v1/completions. The gateway, the engine simulator and the load generator all name it
// with this one type.
#pragma once

#include <cstdint>

namespace kvgate::openai {

enum class ApiKind : uint8_t { kChat, kCompletion };

// The wire dialect of a generation request: OpenAI's chat and completions, Anthropic's
// Messages (anthropic.h) or OpenAI's Responses (responses.h). The last two are routed as
// the chat request they stand for; their answers, events, usage and errors are their own.
enum class Dialect : uint8_t { kOpenAi, kAnthropic, kResponses };

}  // namespace kvgate::openai

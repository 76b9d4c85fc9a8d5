// Helpers shared by the `kvgate engine` integration tests: start an engine process and
// talk JSON and SSE to it.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "io/http_client.h"
#include "process.h"

namespace kvgate::testing {

// Starts `kvgate engine --port 0 <args>` and waits for its URL (and /health 200 unless
// wait_healthy is false), each for up to `patience`. Fails the test on error.
struct EngineProcess {
  std::unique_ptr<ChildProcess> proc;
  std::string url;

  explicit EngineProcess(std::vector<std::string> args, bool wait_healthy = true,
                         std::chrono::seconds patience = std::chrono::seconds(20)) {
    std::vector<std::string> all = {"engine", "--port", "0"};
    all.insert(all.end(), args.begin(), args.end());
    auto p = ChildProcess::spawn(kvgate_bin(), all);
    if (!p) {
      ADD_FAILURE() << p.error();
      return;
    }
    proc = std::move(*p);
    auto u = proc->wait_for_url(patience);
    if (!u) {
      ADD_FAILURE() << u.error();
      return;
    }
    url = *u;
    if (wait_healthy) {
      Status s = proc->wait_for_status(url + "/health", 200, patience);
      if (!s) ADD_FAILURE() << s.error();
    }
  }

  io::HttpClientResponse post(const std::string& path, const std::string& body) {
    auto r = io::http_fetch("POST", url + path, body);
    if (!r) {
      ADD_FAILURE() << r.error();
      return {};
    }
    return *r;
  }

  // The engine's token ids for `prompt` (POST /tokenize); empty when it does not answer.
  std::vector<uint32_t> tokenize(const std::string& prompt);

  io::HttpClientResponse get(const std::string& path) {
    auto r = io::http_fetch("GET", url + path);
    if (!r) {
      ADD_FAILURE() << r.error();
      return {};
    }
    return *r;
  }
};

// Where an engine started with `--kv-events-endpoint tcp://127.0.0.1:*` and
// `--replay-endpoint tcp://127.0.0.1:*` bound its sockets (it prints both): ports the
// engine picks itself, which no test running beside it can take first.
struct KvEventEndpoints {
  std::string publisher;  // tcp://127.0.0.1:PORT
  std::string replay;
};
inline Result<KvEventEndpoints> read_kv_event_endpoints(ChildProcess& engine,
                                                        std::chrono::seconds patience) {
  auto pub = engine.wait_for_line("kv events on ", patience);
  if (!pub) return Error(pub.error());
  auto rep = engine.wait_for_line("kv replay on ", patience);
  if (!rep) return Error(rep.error());
  return KvEventEndpoints{pub->substr(pub->find("tcp://")), rep->substr(rep->find("tcp://"))};
}

inline boost::json::value parse_json(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) ADD_FAILURE() << "bad JSON: " << text;
  return v;
}

inline std::vector<uint32_t> EngineProcess::tokenize(const std::string& prompt) {
  auto v = parse_json(post("/tokenize", R"({"prompt":")" + prompt + R"("})").body);
  std::vector<uint32_t> out;
  if (!v.is_object()) return out;
  for (const auto& t : v.at("tokens").as_array()) {
    out.push_back(static_cast<uint32_t>(t.as_int64()));
  }
  return out;
}

// GET `url` and its JSON body; null when the request fails or the status is not 200.
inline boost::json::value get_json(const std::string& url) {
  auto r = io::http_fetch("GET", url);
  if (!r || r->status != 200) return nullptr;
  return parse_json(r->body);
}

// The JSON payloads of an SSE body's "data: ..." events; "[DONE]" is kept as a string.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(
        body.substr(pos + 6, end == std::string::npos ? std::string::npos : end - pos - 6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

// A prompt of `words` distinct words starting with `tag` (one token per word).
inline std::string words_prompt(const std::string& tag, int words) {
  std::string p;
  for (int i = 0; i < words; ++i) p += tag + std::to_string(i) + " ";
  return p;
}

}  // namespace kvgate::testing

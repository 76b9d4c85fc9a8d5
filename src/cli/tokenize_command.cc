// `kvgate tokenize`: encodes text with a tokenizer.json the way the router does, for users
// checking what the router sees and for the conformance tests.
//
//   kvgate tokenize --tokenizer tokenizer.json < lines.jsonl   # each line a JSON string
//   -> one JSON array of ids per line, or {"error": "..."} for a bad line
//   kvgate tokenize --tokenizer tokenizer.json --chat-template tokenizer_config.json
//   -> each line a chat request {"messages": [...]}, rendered then encoded
//   (--render prints the rendered prompt text as a JSON string instead of ids; the
//   template path the model takes, fast path or general engine, goes to stderr)
//   kvgate tokenize --tokenizer tokenizer.json --chat-template tokenizer_config.json --describe
//   -> one JSON object: which path the tokenizer and the chat template take, or why refused
//   kvgate tokenize --tokenizer tokenizer.json --explain
//   -> first line {"path": "fast"|"general", "why": ..., "components": ...}: which path
//   encode takes; then stdin is processed as without --explain
//   --general: never take the fast path (what the conformance tests check against)
//   kvgate tokenize --config fleet.yaml
//   -> per pool of a gateway config, as `kvgate serve --check` prints them: which path
//   its routing ids take (local fast or general path, engine fallback, none) and why
#include "cli/tokenize_command.h"

#include <boost/json.hpp>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "env/exit_code.h"
#include "env/file.h"
#include "gateway/common/config.h"
#include "gateway/serve_command.h"

namespace kvgate::cli {
namespace {

struct Options {
  std::string config_path;
  std::string tokenizer_path;
  std::string chat_template_path;
  bool decode = false;
  bool render = false;
  bool add_special_tokens = false;
  bool describe = false;
  bool trust_request_chat_template = false;
  std::string content_format = "auto";
  bool no_fast_path = false;
  bool skip_special = false;
  bool general = false;
  bool explain = false;
};

using env::read_file;

void print_error(const std::string& message) {
  std::cout << "{\"error\":" << boost::json::serialize(boost::json::string(message)) << "}\n";
}

// --describe: the paths, as one JSON object (a refused template is reported, not fatal).
int describe(const Options& opt, const Result<tokenizer::Tokenizer>& tok) {
  boost::json::object out;
  if (!opt.tokenizer_path.empty()) {
    boost::json::object t;
    t["file"] = opt.tokenizer_path;
    if (tok) {
      t["path"] = "loaded";
    } else {
      t["path"] = "refused";
      t["reason"] = tok.error();
      t["fallback"] = "engine";  // a pool with it asks its engines (tokenize: auto)
    }
    out["tokenizer"] = std::move(t);
  }
  if (!opt.chat_template_path.empty()) {
    boost::json::object c;
    c["file"] = opt.chat_template_path;
    auto config = read_file(opt.chat_template_path);
    auto tpl = config ? tokenizer::ChatTemplate::load(*config)
                      : Result<tokenizer::ChatTemplate>(Error("cannot read the file"));
    if (tpl) {
      c["path"] = tpl->family() == tokenizer::TemplateFamily::kGeneral ? "general" : "fast_path";
      c["renderer"] = tpl->describe();
      c["content_format"] = tpl->content_as_parts() ? "openai" : "string";
      c["memory_bytes"] = tpl->memory_bytes();
    } else {
      c["path"] = "refused";
      c["reason"] = tpl.error();
      c["fallback"] = "engine";
    }
    out["chat_template"] = std::move(c);
  }
  std::cout << boost::json::serialize(out) << "\n";
  return 0;
}

// --config: the per-pool report of a gateway config (gateway/serve_command.h).
int report(const Options& opt) {
  auto config = gateway::load_gateway_config(opt.config_path);
  if (!config) {
    std::cerr << config.error() << "\n";
    return 2;
  }
  auto lines = gateway::tokenize_report(*config);
  if (!lines) {
    std::cerr << opt.config_path << ": " << lines.error() << "\n";
    return 2;
  }
  for (const std::string& line : *lines) std::cout << line << "\n";
  return 0;
}

int run(const Options& opt) {
  if (!opt.config_path.empty()) return report(opt);
  // --render needs no tokenizer: any model's template renders, whatever its tokenizer.json.
  const bool need_tokenizer = !opt.describe && !(opt.render && !opt.chat_template_path.empty());
  if (opt.tokenizer_path.empty() && need_tokenizer) {
    std::cerr << "kvgate tokenize: --tokenizer is required (except with --chat-template "
                 "--render, --describe or --config)\n";
    return 2;
  }
  std::optional<std::string> text;
  if (!opt.tokenizer_path.empty()) {
    auto read = read_file(opt.tokenizer_path);
    if (!read) {
      std::cerr << "kvgate tokenize: " << read.error() << "\n";
      return 2;
    }
    text = std::move(*read);
  }
  auto tok = text ? tokenizer::Tokenizer::load(*text, {.fast_paths = !opt.general})
                  : Result<tokenizer::Tokenizer>(Error("no --tokenizer given"));
  if (opt.describe) return describe(opt, tok);
  if (!tok && need_tokenizer) {
    std::cerr << "kvgate tokenize: " << opt.tokenizer_path << ": " << tok.error() << "\n";
    return 2;
  }
  if (opt.explain) {
    boost::json::object o;
    o["path"] = tok->path().fast ? "fast" : "general";
    o["why"] = tok->path().why;
    o["components"] = tok->path().components;
    o["memory_bytes"] = tok->memory_bytes();
    std::cout << boost::json::serialize(o) << std::endl;  // then the input lines, if any
  }
  std::optional<tokenizer::ChatTemplate> chat;
  if (!opt.chat_template_path.empty()) {
    auto config = read_file(opt.chat_template_path);
    if (!config) {
      std::cerr << "kvgate tokenize: cannot read " << opt.chat_template_path << "\n";
      return 2;
    }
    auto t = tokenizer::ChatTemplate::load(*config);
    if (!t) {
      std::cerr << "kvgate tokenize: " << opt.chat_template_path << ": " << t.error() << "\n";
      return 2;
    }
    std::cerr << "kvgate tokenize: chat template: " << t->describe() << "\n";
    chat = std::move(*t);
  }
  tokenizer::ChatRenderOptions render_options;
  render_options.now_unix_seconds = static_cast<int64_t>(std::time(nullptr));
  render_options.trust_request_chat_template = opt.trust_request_chat_template;
  render_options.allow_fast_path = !opt.no_fast_path;
  render_options.content_format = *tokenizer::parse_content_format(opt.content_format);
  std::ios::sync_with_stdio(false);
  std::string line, out;
  std::vector<uint32_t> ids;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec) {
      print_error("line is not JSON: " + ec.message());
      continue;
    }
    if (opt.decode) {
      if (!v.is_array()) {
        print_error("--decode needs a JSON array of ids per line");
        continue;
      }
      ids.clear();
      bool ok = true;
      for (const auto& x : v.as_array()) {
        if (!x.is_int64() || x.as_int64() < 0 || x.as_int64() > UINT32_MAX) {
          ok = false;
          break;
        }
        ids.push_back(static_cast<uint32_t>(x.as_int64()));
      }
      if (!ok) {
        print_error("ids must be non-negative integers");
        continue;
      }
      auto s = tok->decode(ids, opt.skip_special);
      if (!s) {
        print_error(s.error());
        continue;
      }
      std::cout << boost::json::serialize(boost::json::string(*s)) << "\n";
      continue;
    }
    std::string prompt;
    if (chat) {
      auto req = tokenizer::parse_chat_request(line);
      if (!req) {
        print_error(req.error());
        continue;
      }
      auto r = chat->render(*req, render_options);
      if (!r) {
        print_error(r.error());
        continue;
      }
      prompt = std::move(*r);
      if (opt.render) {
        std::cout << boost::json::serialize(boost::json::string(prompt)) << "\n";
        continue;
      }
    } else if (v.is_string()) {
      prompt = std::string(v.as_string());
    } else {
      print_error("each line must be a JSON string");
      continue;
    }
    ids.clear();
    if (Status st = tok->encode_into(prompt, ids); !st) {
      print_error(st.error());
      continue;
    }
    if (opt.add_special_tokens) {
      std::vector<uint32_t> with;
      tok->post_process(ids, nullptr, with);
      ids.swap(with);
    }
    out.clear();
    out.push_back('[');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out.push_back(',');
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::cout << out;
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Encode text to token ids (or decode ids) with a Hugging Face tokenizer.json, exactly "
      "as the router does. Reads JSON lines on stdin: a JSON string per line (encode) or a "
      "JSON array of ids (--decode); writes one JSON line per input line, {\"error\": ...} "
      "for a bad one.");
  cmd->add_option("--config", opt->config_path,
                  "A gateway config (kvgate serve's YAML): print per pool where its routing ids "
                  "come from (local fast or general path, engine fallback, or none) and why, "
                  "as `kvgate serve --check` does, and exit")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", opt->tokenizer_path,
                  "Path of tokenizer.json (required, except with --chat-template --render, "
                  "--describe or --config)");
  cmd->add_flag("--decode", opt->decode, "Decode arrays of ids to text instead of encoding");
  cmd->add_flag("--skip-special-tokens", opt->skip_special,
                "With --decode: drop added tokens marked special");
  cmd->add_flag("--general", opt->general,
                "Never take a fast path (hand-written scanner): run the general pipeline");
  cmd->add_flag("--explain", opt->explain,
                "Print first a JSON line saying which path (fast or general) the tokenizer takes "
                "and why, then process stdin as usual");
  cmd->add_option("--chat-template", opt->chat_template_path,
                  "tokenizer_config.json: input lines are chat requests {\"messages\": [...]} "
                  "rendered with its chat template (any Jinja template, as vLLM renders it), "
                  "then encoded");
  cmd->add_flag("--render", opt->render, "With --chat-template: print the prompt text, not ids");
  cmd->add_flag("--describe", opt->describe,
                "Print which path the tokenizer and chat template take (fast path, general "
                "engine, or refused and why) as JSON, and exit");
  cmd->add_flag("--trust-request-chat-template", opt->trust_request_chat_template,
                "Render a request's own chat_template field (vLLM's "
                "--trust-request-chat-template); refused otherwise");
  cmd->add_option("--chat-template-content-format", opt->content_format,
                  "How message content reaches the template, as vLLM's flag of that name: auto "
                  "(a list of text parts when the template loops over content, else a string), "
                  "string or openai (parts)")
      ->check(CLI::IsMember({"auto", "string", "openai"}))
      ->capture_default_str();
  cmd->add_flag("--no-fast-path", opt->no_fast_path,
                "Render with the general Jinja engine even where a hand-written fast path "
                "exists (for comparing the two)");
  cmd->add_flag("--add-special-tokens", opt->add_special_tokens,
                "Add the post-processor's special tokens (e.g. Llama 3.1's BOS), as vLLM does "
                "for completions prompts");
  cmd->callback([opt] { env::set_exit_code(run(*opt)); });
}

}  // namespace kvgate::cli

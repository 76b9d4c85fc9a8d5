// `kvgate tokenize`: encodes text with a tokenizer.json the way the router does, for users
// checking what the router sees and for the conformance tests.
//
//   kvgate tokenize --tokenizer tokenizer.json < lines.jsonl   # each line a JSON string
//   -> one JSON array of ids per line, or {"error": "..."} for a bad line
#include "cli/tokenize_command.h"

#include <boost/json.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "core/tokenizer/tokenizer.h"

namespace kvgate::cli {
namespace {

struct Options {
  std::string tokenizer_path;
  bool decode = false;
};

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void print_error(const std::string& message) {
  std::cout << "{\"error\":" << boost::json::serialize(boost::json::string(message)) << "}\n";
}

int run(const Options& opt) {
  auto text = read_file(opt.tokenizer_path);
  if (!text) {
    std::cerr << "kvgate tokenize: cannot read " << opt.tokenizer_path << "\n";
    return 2;
  }
  auto tok = tokenizer::Tokenizer::load(*text);
  if (!tok) {
    std::cerr << "kvgate tokenize: " << opt.tokenizer_path << ": " << tok.error() << "\n";
    return 2;
  }
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
      auto s = tok->decode(ids, false);
      if (!s) {
        print_error(s.error());
        continue;
      }
      std::cout << boost::json::serialize(boost::json::string(*s)) << "\n";
      continue;
    }
    if (!v.is_string()) {
      print_error("each line must be a JSON string");
      continue;
    }
    ids.clear();
    const auto& s = v.as_string();
    if (Status st = tok->encode_into(std::string_view(s.data(), s.size()), ids); !st) {
      print_error(st.error());
      continue;
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
  cmd->add_option("--tokenizer", opt->tokenizer_path, "Path of tokenizer.json")->required();
  cmd->add_flag("--decode", opt->decode, "Decode arrays of ids to text instead of encoding");
  cmd->callback([opt] { set_exit_code(run(*opt)); });
}

}  // namespace kvgate::cli

// `kvgate keys add`: makes a key, prints it once, appends only its SHA-256 to a keys file
// (keys.h says what the file holds).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "env/exit_code.h"
#include "env/file.h"
#include "gateway/data/keys.h"

namespace kvgate::gateway {
namespace {

struct AddOptions {
  std::string tenant;
  std::vector<std::string> models;
  int priority = 0;
  bool may_set_priority = false;
  std::string file;
};

int run_add(const AddOptions& o) {
  // Refuse to append to a file that does not parse: the result would not load either.
  if (Result<std::string> text = env::read_file(o.file)) {
    auto existing = KeyStore::parse(*text, o.file);
    if (!existing) {
      fmt::print(stderr, "kvgate keys add: {}\n", existing.error());
      return 2;
    }
  }
  auto key = generate_key();
  if (!key) {
    fmt::print(stderr, "kvgate keys add: {}\n", key.error());
    return 1;
  }
  YAML::Emitter out;
  out << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "sha256" << YAML::Value << to_hex(sha256(*key));
  out << YAML::Key << "tenant" << YAML::Value << o.tenant;
  if (!o.models.empty()) {
    out << YAML::Key << "models" << YAML::Value << YAML::Flow << o.models;
  }
  out << YAML::Key << "priority" << YAML::Value << o.priority;
  if (o.may_set_priority) out << YAML::Key << "may_set_priority" << YAML::Value << true;
  out << YAML::EndMap << YAML::EndSeq;

  int fd = ::open(o.file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) {
    fmt::print(stderr, "kvgate keys add: {}: cannot open for writing\n", o.file);
    return 1;
  }
  ::flock(fd, LOCK_EX);
  std::string text;
  if (::lseek(fd, 0, SEEK_END) == 0) text = "keys:\n";
  // Indent the emitted list item under `keys:`.
  std::string item = out.c_str();
  std::string indented = "  ";
  for (char c : item) {
    indented += c;
    if (c == '\n') indented += "  ";
  }
  text += indented + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) {
    fmt::print(stderr, "kvgate keys add: {}: write failed\n", o.file);
    return 1;
  }
  // The key itself goes to stdout once; it is stored nowhere.
  fmt::print("{}\n", *key);
  fmt::print(stderr, "added a key for tenant '{}' to {} (only its SHA-256 is stored)\n", o.tenant,
             o.file);
  return 0;
}

}  // namespace

void add_keys_command(CLI::App& app) {
  CLI::App* keys = app.add_subcommand("keys", "Manage the gateway's API keys file");
  keys->require_subcommand(1);
  auto opts = std::make_shared<AddOptions>();
  CLI::App* add = keys->add_subcommand(
      "add", "Generate a new API key for a tenant, print it once, store only its SHA-256");
  add->add_option("--tenant", opts->tenant, "Tenant the key belongs to")->required();
  add->add_option("--models", opts->models, "Models the tenant may use (default: all)");
  add->add_option("--priority", opts->priority, "Default priority (>0 critical, <0 sheddable)");
  add->add_flag("--may-set-priority", opts->may_set_priority,
                "Let the tenant override its priority with the x-kvgate-priority header");
  add->add_option("--file", opts->file, "Keys file (YAML), created when absent")->required();
  add->callback([opts] { env::set_exit_code(run_add(*opts)); });
}

}  // namespace kvgate::gateway

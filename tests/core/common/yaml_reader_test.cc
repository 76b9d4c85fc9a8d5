// The one YAML reader: its error format (file, place, field), the value-style reads the
// core and the scenarios use and the throwing reads the gateway's config uses.
#include "core/common/yaml_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

namespace kvgate {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace yaml_reader_test {

// The message of the YamlError that `read` throws.
std::string thrown(const std::function<void()>& read) {
  try {
    read();
  } catch (const YamlError& e) {
    return e.message;
  }
  return "(no error)";
}

TEST(YamlReader, ErrorsNameTheFileThePlaceAndTheField) {
  const YAML::Node root = YAML::Load("a: 1\nb: {c: x}\n");
  const YamlReader y("fleet.yaml");
  EXPECT_EQ(y.error(root["b"]["c"], "b.c", "expected a number").message,
            "fleet.yaml:2:8: b.c: expected a number");
  // No file name: no "FILE:" prefix.
  EXPECT_EQ(YamlReader().error(root["b"]["c"], "b.c", "expected a number").message,
            "2:8: b.c: expected a number");
  // A node with no place in a text (built in code, or a missing key): no "LINE:COLUMN:".
  EXPECT_EQ(y.error(YAML::Node(), "d", "missing").message, "fleet.yaml: d: missing");
  EXPECT_EQ(y.error(root["nope"], "nope", "missing").message, "fleet.yaml: nope: missing");
  EXPECT_EQ(YamlReader().error(root["nope"], "nope", "missing").message, "nope: missing");
}

TEST(YamlReader, YamlCppErrorsHaveTheSameFormat) {
  const YamlReader y("fleet.yaml");
  try {
    YAML::Load("a: [1, 2\n");
    FAIL() << "malformed YAML parsed";
  } catch (const YAML::Exception& e) {
    const std::string message = y.error(e).message;
    EXPECT_TRUE(message.starts_with("fleet.yaml:")) << message;
    EXPECT_TRUE(message.ends_with(": " + e.msg)) << message;
  }
}

TEST(YamlReader, ExpectMapNamesTheFirstUnknownKey) {
  const YamlReader y;
  const YAML::Node root = YAML::Load("a: 1\ntypo: 2\n");
  EXPECT_TRUE(y.expect_map(root, "s", {"a", "typo"}).ok());
  EXPECT_TRUE(y.expect_map(root, "s", {"a"}, {"typo"}).ok());  // the caller's own keys
  EXPECT_EQ(y.expect_map(root, "s", {"a"}).error(), "2:1: s.typo: unknown field");
  EXPECT_EQ(y.expect_map(root["a"], "s.a", {}).error(), "1:4: s.a: expected a mapping");
  EXPECT_EQ(y.expect_map(root["none"], "s.none", {}).error(), "s.none: expected a mapping");
}

TEST(YamlReader, ReadConvertsOrNamesTheType) {
  const YamlReader y;
  const YAML::Node n = YAML::Load("count: 3\nratio: half\nname: [q]\nneg: -1\nnothing: ~\n");
  uint32_t count = 0;
  EXPECT_TRUE(y.read(n, "count", count, "s").ok());
  EXPECT_EQ(count, 3u);
  double ratio = 1;
  EXPECT_EQ(y.read(n, "ratio", ratio, "s").error(), "2:8: s.ratio: expected a number");
  EXPECT_DOUBLE_EQ(ratio, 1);
  std::string name = "kept";
  EXPECT_EQ(y.read(n, "name", name, "s").error(), "3:7: s.name: expected a string");
  uint32_t neg = 0;
  EXPECT_EQ(y.read(n, "neg", neg, "s").error(), "4:6: s.neg: expected a whole number");
  int32_t negative = 0;
  EXPECT_TRUE(y.read(n, "neg", negative, "s").ok());
  EXPECT_EQ(negative, -1);
  // Absent or null: unchanged.
  bool flag = true;
  EXPECT_TRUE(y.read(n, "absent", flag, "s").ok());
  EXPECT_TRUE(y.read(n, "nothing", flag, "s").ok());
  EXPECT_TRUE(flag);
}

TEST(YamlReader, ThrowingReads) {
  const YamlReader y("/etc/kvgate/f.yaml", "/etc/kvgate");
  const YAML::Node n = YAML::Load("port: 70000\nsync: maybe\nlist: [a, {b: c}]\nextra: 1\n");
  EXPECT_EQ(thrown([&] { y.integer(n["port"], "port", 1, 65535); }),
            "/etc/kvgate/f.yaml:1:7: port: 70000 is outside [1, 65535]");
  EXPECT_EQ(y.integer(n["port"], "port", 0, 100'000), 70000);
  EXPECT_EQ(thrown([&] { y.boolean(n["sync"], "sync"); }),
            "/etc/kvgate/f.yaml:2:7: sync: expected true or false, got 'maybe'");
  EXPECT_EQ(thrown([&] { y.strings(n["list"], "list"); }),
            "/etc/kvgate/f.yaml:3:11: list[1]: expected a string");
  EXPECT_EQ(thrown([&] {
              y.only_keys(n, "config", {"port", "sync", "list"});
            }),
            "/etc/kvgate/f.yaml:4:1: config.extra: unknown field");
}

TEST(YamlReader, PathsAreRelativeToTheConfigFilesDirectory) {
  const YAML::Node n = YAML::Load("cert: tls/../certs/c.pem\nabs: /x/k.pem\nup: ../../k.pem\n");
  const YamlReader etc("/etc/kvgate/f.yaml", "/etc/kvgate");
  EXPECT_EQ(etc.path(n["cert"], "cert"), "/etc/kvgate/certs/c.pem");
  EXPECT_EQ(etc.path(n["abs"], "abs"), "/x/k.pem");
  EXPECT_EQ(etc.path(n["up"], "up"), "/k.pem");
  const YamlReader here("f.yaml");  // the directory "."
  EXPECT_EQ(here.path(n["cert"], "cert"), "certs/c.pem");
  EXPECT_EQ(here.path(n["up"], "up"), "../../k.pem");
  EXPECT_EQ(YamlReader("a/f.yaml", "a").path(n["up"], "up"), "../k.pem");
}

}  // namespace yaml_reader_test
}  // namespace kvgate

// The reconciler in virtual time: diffs, the flapping grace, empty sets held, several
// sources, resync differences.
#include "core/discovery/reconciler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvgate::discovery {
namespace {

DiscoveredEndpoint ep(const std::string& url, Role role = Role::kBoth, bool ready = true) {
  DiscoveredEndpoint e;
  e.spec.url = url;
  e.spec.role = role;
  e.ready = ready;
  return e;
}

// "add http://a:1, suspend http://b:1" for compact expectations.
std::string describe(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) {
    if (!out.empty()) out += ", ";
    out += std::string(to_string(a.kind)) + " " + a.endpoint.spec.url;
  }
  return out;
}

TEST(Reconciler, AddsWhatIsNewAndSuspendsThenRemovesWhatVanished) {
  Reconciler r({.grace = 10 * kSecond});
  size_t s = r.add_source("dns");
  EXPECT_EQ(describe(r.report(s, 0, {ep("http://a:1"), ep("http://b:1")})),
            "add http://a:1, add http://b:1");
  EXPECT_EQ(describe(r.report(s, kSecond, {ep("http://a:1"), ep("http://b:1")})), "");
  EXPECT_EQ(describe(r.report(s, 2 * kSecond, {ep("http://a:1")})), "suspend http://b:1");
  EXPECT_EQ(r.next_deadline(), 12 * kSecond);
  EXPECT_EQ(describe(r.tick(11 * kSecond)), "");
  EXPECT_EQ(describe(r.tick(12 * kSecond)), "remove http://b:1");
  EXPECT_EQ(r.next_deadline(), std::nullopt);
  EXPECT_EQ(r.stats(s).changes, 4u);
  EXPECT_EQ(r.stats(s).reports, 3u);
  EXPECT_EQ(r.stats(s).endpoints, 1u);
  EXPECT_EQ(r.stats(s).last_success, 2 * kSecond);
}

TEST(Reconciler, AnEndpointBackWithinTheGraceIsResumedNotReadded) {
  Reconciler r({.grace = 10 * kSecond});
  size_t s = r.add_source("k8s");
  (void)r.report(s, 0, {ep("http://a:1"), ep("http://b:1")});
  EXPECT_EQ(describe(r.report(s, kSecond, {ep("http://a:1")})), "suspend http://b:1");
  EXPECT_EQ(describe(r.report(s, 5 * kSecond, {ep("http://a:1"), ep("http://b:1")})),
            "resume http://b:1");
  EXPECT_EQ(describe(r.tick(20 * kSecond)), "");
  // Back after the grace ran out: a new endpoint.
  EXPECT_EQ(describe(r.report(s, 21 * kSecond, {ep("http://a:1")})), "suspend http://b:1");
  EXPECT_EQ(describe(r.tick(31 * kSecond)), "remove http://b:1");
  EXPECT_EQ(describe(r.report(s, 32 * kSecond, {ep("http://a:1"), ep("http://b:1")})),
            "add http://b:1");
}

TEST(Reconciler, ZeroGraceRemovesAtOnce) {
  Reconciler r({.grace = 0});
  size_t s = r.add_source("file");
  (void)r.report(s, 0, {ep("http://a:1"), ep("http://b:1")});
  EXPECT_EQ(describe(r.report(s, 1, {ep("http://b:1")})), "remove http://a:1");
}

TEST(Reconciler, NotReadyCountsAsAbsent) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("k8s");
  EXPECT_EQ(describe(r.report(s, 0, {ep("http://a:1", Role::kBoth, false)})), "");
  EXPECT_EQ(describe(r.report(s, 1, {ep("http://a:1")})), "add http://a:1");
  EXPECT_EQ(describe(r.report(s, 2, {ep("http://a:1", Role::kBoth, false)})), "suspend http://a:1");
}

TEST(Reconciler, AChangedSpecReplacesTheEndpoint) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("k8s");
  (void)r.report(s, 0, {ep("http://a:1", Role::kPrefill)});
  auto actions = r.report(s, 1, {ep("http://a:1", Role::kDecode)});
  ASSERT_EQ(describe(actions), "remove http://a:1, add http://a:1");
  EXPECT_EQ(actions[1].endpoint.spec.role, Role::kDecode);
  DiscoveredEndpoint with_events = ep("http://a:1", Role::kDecode);
  with_events.kv_events = KvEventsAddress{.publisher = "tcp://a:5557"};
  EXPECT_EQ(describe(r.report(s, 2, {with_events})), "remove http://a:1, add http://a:1");
}

TEST(Reconciler, ASuddenEmptySetIsHeld) {
  Reconciler r({.grace = 5 * kSecond, .hold_empty = true, .hold_empty_max = 60 * kSecond});
  size_t s = r.add_source("dns");
  (void)r.report(s, 0, {ep("http://a:1"), ep("http://b:1")});
  EXPECT_EQ(describe(r.report(s, kSecond, {})), "");
  EXPECT_EQ(describe(r.report(s, 30 * kSecond, {})), "");
  EXPECT_EQ(r.stats(s).held_empty, 2u);
  EXPECT_EQ(r.stats(s).endpoints, 2u);
  // Still empty a minute after it began: believed.
  EXPECT_EQ(describe(r.report(s, 61 * kSecond, {})), "suspend http://a:1, suspend http://b:1");
  // Empty after empty is no longer sudden.
  EXPECT_EQ(describe(r.report(s, 62 * kSecond, {})), "");
  EXPECT_EQ(r.stats(s).held_empty, 2u);
}

TEST(Reconciler, AnEmptySetIsBelievedWhenHoldingIsOff) {
  Reconciler r({.grace = 0, .hold_empty = false});
  size_t s = r.add_source("file");
  (void)r.report(s, 0, {ep("http://a:1")});
  EXPECT_EQ(describe(r.report(s, 1, {})), "remove http://a:1");
}

TEST(Reconciler, AHeldEmptySetEndsWhenEndpointsCome) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("dns");
  (void)r.report(s, 0, {ep("http://a:1"), ep("http://b:1")});
  EXPECT_EQ(describe(r.report(s, 1, {})), "");
  EXPECT_EQ(describe(r.report(s, 2, {ep("http://b:1")})), "suspend http://a:1");
}

TEST(Reconciler, ErrorsKeepTheLastGoodSet) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("dns");
  (void)r.report(s, 0, {ep("http://a:1")});
  r.report_error(s, kSecond, "server down");
  r.report_error(s, 2 * kSecond, "server down");
  EXPECT_EQ(r.stats(s).errors, 2u);
  EXPECT_EQ(r.stats(s).last_error, 2 * kSecond);
  EXPECT_EQ(r.stats(s).last_error_message, "server down");
  EXPECT_EQ(r.stats(s).last_success, 0);
  EXPECT_EQ(describe(r.tick(100 * kSecond)), "");
  ASSERT_EQ(r.entries().size(), 1u);
  EXPECT_FALSE(r.entries()[0].suspended);
}

TEST(Reconciler, SeveralSourcesUnionAndTheFirstSourceGivesTheSpec) {
  Reconciler r({.grace = 5 * kSecond});
  size_t file = r.add_source("file");
  size_t dns = r.add_source("dns");
  EXPECT_EQ(describe(r.report(dns, 0, {ep("http://a:1", Role::kDecode)})), "add http://a:1");
  EXPECT_EQ(r.owner("http://a:1"), "dns");
  // The file (first in configuration order) reports it too, as prefill: its spec wins.
  EXPECT_EQ(describe(r.report(file, 1, {ep("http://a:1", Role::kPrefill)})),
            "remove http://a:1, add http://a:1");
  EXPECT_EQ(describe(r.report(dns, 2, {})), "");  // held (sudden empty)
  EXPECT_EQ(describe(r.report(dns, 3, {ep("http://b:1")})), "add http://b:1");
  // a is still reported by the file.
  EXPECT_EQ(describe(r.report(file, 4, {})), "");  // held
  auto entries = r.entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].sources, std::vector<std::string>{"file"});
  EXPECT_EQ(entries[1].sources, std::vector<std::string>{"dns"});
  EXPECT_EQ(r.owner("http://nope:1"), "");
}

TEST(Reconciler, AnEndpointLeavesOnlyWhenNoSourceReportsIt) {
  Reconciler r({.grace = 0, .hold_empty = false});
  size_t a = r.add_source("a");
  size_t b = r.add_source("b");
  (void)r.report(a, 0, {ep("http://x:1")});
  EXPECT_EQ(describe(r.report(b, 1, {ep("http://x:1")})), "");
  EXPECT_EQ(describe(r.report(a, 2, {})), "");
  EXPECT_EQ(describe(r.report(b, 3, {})), "remove http://x:1");
}

TEST(Reconciler, ResyncCountsWhatTheSetMissed) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("k8s");
  (void)r.report(s, 0, {ep("http://a:1"), ep("http://b:1")});
  (void)r.report(s, 1, {ep("http://a:1"), ep("http://b:1")}, /*resync=*/true);
  EXPECT_EQ(r.stats(s).resync_differences, 0u);
  // The watch missed b's deletion, c's addition and a's new role.
  auto actions = r.report(s, 2, {ep("http://a:1", Role::kDecode), ep("http://c:1")}, true);
  EXPECT_EQ(r.stats(s).resync_differences, 3u);
  EXPECT_EQ(describe(actions),
            "remove http://a:1, add http://a:1, suspend http://b:1, add http://c:1");
  // Differences outside a resync are changes, not resync differences.
  (void)r.report(s, 3, {ep("http://c:1")});
  EXPECT_EQ(r.stats(s).resync_differences, 3u);
}

TEST(Reconciler, ARefusedAddIsTriedAgainOnTheNextReport) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("file");
  EXPECT_EQ(describe(r.report(s, 0, {ep("http://a:1")})), "add http://a:1");
  r.add_failed("http://a:1");
  EXPECT_EQ(describe(r.report(s, 1, {ep("http://a:1")})), "add http://a:1");
}

TEST(Reconciler, DuplicatesInOneReportKeepTheFirst) {
  Reconciler r({.grace = 5 * kSecond});
  size_t s = r.add_source("file");
  auto actions =
      r.report(s, 0, {ep("http://a:1", Role::kPrefill), ep("http://a:1", Role::kDecode)});
  ASSERT_EQ(describe(actions), "add http://a:1");
  EXPECT_EQ(actions[0].endpoint.spec.role, Role::kPrefill);
}

}  // namespace
}  // namespace kvgate::discovery

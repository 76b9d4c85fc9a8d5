// PeerReports: a peer's value is kept from its first report, replaced by the next, and
// forgotten after the timeout of silence; live() counts the peers heard within it.
#include "core/cluster/peer_reports.h"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::cluster {
namespace peer_reports_test {

TEST(PeerReports, KeepsEachPeersValueUntilItFallsSilent) {
  PeerReports<int> peers(10 * kSecond);
  EXPECT_EQ(peers.find("gw-2"), nullptr);
  peers.heard("gw-2", 0) = 7;
  peers.heard("gw-3", 5 * kSecond) = 1;
  ASSERT_NE(peers.find("gw-2"), nullptr);
  EXPECT_EQ(*peers.find("gw-2"), 7);
  EXPECT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers.live(9 * kSecond), 2u);
  EXPECT_EQ(peers.live(10 * kSecond), 1u);  // gw-2 silent for the whole timeout

  EXPECT_EQ(peers.expire(10 * kSecond), 1u);
  EXPECT_EQ(peers.find("gw-2"), nullptr);
  EXPECT_EQ(peers.size(), 1u);

  // A report keeps the value the caller left (a value to add to) and renews the peer.
  peers.heard("gw-3", 12 * kSecond) += 2;
  EXPECT_EQ(*peers.find("gw-3"), 3);
  EXPECT_EQ(peers.expire(21 * kSecond), 0u);
  EXPECT_EQ(peers.live(21 * kSecond), 1u);

  int seen = 0;
  for (const auto& [name, p] : peers) {
    EXPECT_EQ(name, "gw-3");
    EXPECT_EQ(p.value, 3);
    EXPECT_EQ(p.last_heard, 12 * kSecond);
    ++seen;
  }
  EXPECT_EQ(seen, 1);

  peers.clear();
  EXPECT_EQ(peers.size(), 0u);
  EXPECT_EQ(peers.live(21 * kSecond), 0u);
}

}  // namespace peer_reports_test
}  // namespace kvgate::cluster

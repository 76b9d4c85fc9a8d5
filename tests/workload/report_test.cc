#include "workload/report.h"

#include <gtest/gtest.h>

#include "workload/svg_plot.h"

namespace kvgate::workload {
namespace {

TEST(Report, Quantile) {
  EXPECT_EQ(quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.9), 9);
  EXPECT_DOUBLE_EQ(quantile({5}, 0.99), 5);
}

TEST(Report, WarmupIsLeftOutAndStageThroughputIsLlmdStyle) {
  std::vector<workload::StageInfo> stages = {{10, 0, 10 * kSecond, true},
                                             {5, 10 * kSecond, 20 * kSecond, false},
                                             {20, 20 * kSecond, 30 * kSecond, false}};
  PolicyRun run;
  run.policy = "p";
  // Warm-up request with a huge TTFT: must not show.
  run.requests.push_back({0, 0, 0, 100 * kSecond, 101 * kSecond, 100, 0, 10, false});
  // Stage 1: two requests, 100 output tokens each, spanning 10 s -> 20 tok/s.
  run.requests.push_back({1, 0, 10 * kSecond, 11 * kSecond, 15 * kSecond, 100, 50, 100, false});
  run.requests.push_back({1, 1, 12 * kSecond, 14 * kSecond, 20 * kSecond, 100, 50, 100, false});
  // Stage 2: one request, 50 tokens over 5 s -> 10 tok/s; one rejected.
  run.requests.push_back({2, 1, 20 * kSecond, 21 * kSecond, 25 * kSecond, 100, 0, 50, false});
  run.requests.push_back({2, 0, 21 * kSecond, -1, -1, 100, 0, 0, true});
  run.samples = {{5 * kSecond, 100, 1}, {15 * kSecond, 2, 0.5}, {25 * kSecond, 4, 0.25}};
  run.end_time = 30 * kSecond;
  run.wall_seconds = 0.5;
  const Summary s = summarize(run, stages);
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.completed, 3u);
  EXPECT_NEAR(s.ttft_p50, 1, 1e-9);
  EXPECT_LT(s.ttft_p99, 2.1);
  EXPECT_NEAR(s.output_tps, (20 + 10) / 2.0, 1e-9);
  EXPECT_NEAR(s.hit_rate, 100.0 / 300, 1e-9);
  EXPECT_NEAR(s.mean_waiting, 3, 1e-9);  // warm-up sample left out
  EXPECT_NEAR(s.speedup, 60, 1e-9);
  // ITL: (4 + 6 + 4) s over (99 + 99 + 49) tokens.
  EXPECT_NEAR(s.itl_mean, 14.0 / 247, 1e-9);
  ASSERT_EQ(s.stages.size(), 3u);
  EXPECT_NEAR(s.stages[0].ttft_p90, 100, 1e-9);
  EXPECT_EQ(s.stages[2].requests, 2u);

  const std::string table = format_table("x", {s});
  EXPECT_NE(table.find("p "), std::string::npos);
  EXPECT_NE(summary_csv({s}).find("p,4,3,1,"), std::string::npos);
  EXPECT_NE(report_json("x", 1, {s}).find("\"ttft_p90_s\""), std::string::npos);
  const std::string csv = stages_csv({s});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
}

// Session affinity's figures: measured requests routed with a session, of which kept
// and moved; shown only when a policy keeps it, so other reports stay as they were.
TEST(Report, SessionHitRateOnlyWhenAPolicyKeepsSessions) {
  const std::vector<workload::StageInfo> stages = {{1, 0, 10 * kSecond, true},
                                                   {1, 10 * kSecond, 20 * kSecond, false}};
  PolicyRun with;
  with.policy = "on";
  with.sessions = true;
  for (int i = 0; i < 6; ++i) {
    RequestRecord r;
    r.stage = i == 0 ? 0 : 1;  // the first is warm-up: left out
    r.arrival = (i == 0 ? 1 : 10 + i) * kSecond;
    r.first_token = r.arrival + kSecond;
    r.finish = r.arrival + 2 * kSecond;
    r.prompt_tokens = 100;
    r.output_tokens = 10;
    r.session = i < 5;                            // four measured with a session
    r.session_kept = i == 0 || i == 2 || i == 3;  // two of them kept
    r.session_moved = i == 4;                     // one moved, one new (i == 1)
    with.requests.push_back(r);
  }
  with.end_time = 20 * kSecond;
  const Summary on = summarize(with, stages);
  EXPECT_TRUE(on.session_report);
  EXPECT_EQ(on.session_requests, 4u);
  EXPECT_EQ(on.session_kept, 2u);
  EXPECT_EQ(on.session_moved, 1u);
  EXPECT_NEAR(on.session_hit_rate, 0.5, 1e-12);

  PolicyRun without = with;
  without.policy = "off";
  without.sessions = false;
  for (RequestRecord& r : without.requests) r.session = r.session_kept = r.session_moved = false;
  const Summary off = summarize(without, stages);
  EXPECT_FALSE(off.session_report);
  EXPECT_EQ(summary_csv({off}).find("session"), std::string::npos);
  EXPECT_EQ(report_json("x", 1, {off}).find("session"), std::string::npos);
  EXPECT_EQ(format_table("x", {off}).find("sessions"), std::string::npos);
  // Beside a policy with it, the columns appear for both (0 for the one without).
  const std::string csv = summary_csv({on, off});
  EXPECT_NE(csv.find(",session_requests,session_kept,session_moved,session_hit_rate\n"),
            std::string::npos);
  EXPECT_NE(csv.find(",4,2,1,0.5000\n"), std::string::npos);
  EXPECT_NE(csv.find(",0,0,0,0.0000\n"), std::string::npos);
  EXPECT_NE(report_json("x", 1, {on, off}).find("\"session_hit_rate\""), std::string::npos);
  EXPECT_NE(format_table("x", {on, off}).find("sessions"), std::string::npos);
}

TEST(Report, LatencyTargetAttainmentPerTargetAndOverall) {
  // What `kvgate bench` and `kvgate sim` report for a workload with `targets:`: each
  // target's share met among the requests that carry it, and all targets met.
  PolicyRun run;
  run.policy = "live";
  run.latency_targets = true;
  auto add = [&](Nanos ttft, Nanos e2e, uint32_t out, Nanos ttft_target, Nanos tpot_target,
                 bool rejected = false) {
    RequestRecord r;
    r.arrival = 0;
    r.first_token = rejected ? -1 : ttft;
    r.finish = rejected ? -1 : e2e;
    r.output_tokens = rejected ? 0 : out;
    r.rejected = rejected;
    r.ttft_target = ttft_target;
    r.tpot_target = tpot_target;
    run.requests.push_back(r);
  };
  const Nanos ms = kMillisecond;
  // Both targets, both met: TTFT 100 ms <= 200; (1100 - 100) / 10 = 100 ms <= 100.
  add(100 * ms, 1100 * ms, 11, 200 * ms, 100 * ms);
  // Both targets, TTFT met, TPOT missed: 1000 / 5 = 200 ms > 100.
  add(100 * ms, 1100 * ms, 6, 200 * ms, 100 * ms);
  // TTFT only, missed.
  add(300 * ms, 400 * ms, 2, 200 * ms, 0);
  // TPOT only, met; one token: no time per output token to miss.
  add(900 * ms, 900 * ms, 1, 0, 50 * ms);
  // Both targets, refused: meets none.
  add(0, 0, 0, 200 * ms, 100 * ms, /*rejected=*/true);
  // No targets: in the p90 of the others only.
  add(700 * ms, 800 * ms, 2, 0, 0);
  const Summary s = summarize(run, {});
  EXPECT_TRUE(s.latency_report);
  EXPECT_FALSE(s.predictor);
  EXPECT_EQ(s.targeted, 5u);
  EXPECT_DOUBLE_EQ(s.ttft_target_met, 2.0 / 4);  // of the four with a TTFT target
  EXPECT_DOUBLE_EQ(s.tpot_target_met, 2.0 / 4);  // of the four with a TPOT target
  EXPECT_DOUBLE_EQ(s.slo_met, 2.0 / 5);          // the first and the TPOT-only one
  EXPECT_NEAR(s.untargeted_ttft_p90, 0.7, 1e-9);
  const std::string csv = summary_csv({s});
  EXPECT_NE(csv.find(",targeted,ttft_target_met,tpot_target_met,slo_met,untargeted_ttft_p90_s,"
                     "predictor_ttft_mape,predictor_tpot_mape,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",5,0.5000,0.5000,0.4000,0.7000,,,0,0\n"), std::string::npos) << csv;
  EXPECT_NE(format_table("t", {s}).find("TPOT met"), std::string::npos);
  EXPECT_NE(report_json("t", 1, {s}).find("\"tpot_target_met\""), std::string::npos);
}

TEST(SvgPlot, RendersSeriesAndSkipsNonPositiveOnLogAxes) {
  LineChart c{.title = "t <&>", .x_label = "x", .y_label = "y", .log_x = true};
  c.series.push_back({"a", {{0.0, 0.1}, {0.5, 0.5}, {50, 1}}, true});
  c.series.push_back({"b", {}, false});
  const std::string svg = render_svg(c);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<') - std::count(svg.begin(), svg.end(), '>'), 0);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  // Two points survive the log axis (0 is dropped): two markers.
  size_t circles = 0;
  for (size_t p = svg.find("<circle"); p != std::string::npos; p = svg.find("<circle", p + 1))
    ++circles;
  EXPECT_EQ(circles, 2u);
}

TEST(SvgPlot, CdfIsMonotoneAndEndsAtOne) {
  std::vector<double> v;
  for (int i = 0; i < 10000; ++i) v.push_back((i * 7919) % 1000);
  auto pts = cdf_points(v, 100);
  ASSERT_LE(pts.size(), 102u);
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_GE(pts[i].first, pts[i - 1].first);
    EXPECT_GT(pts[i].second, pts[i - 1].second);
  }
  EXPECT_DOUBLE_EQ(pts.back().second, 1.0);
  EXPECT_TRUE(cdf_points({}).empty());
}

}  // namespace
}  // namespace kvgate::workload

#include "workload/pd_load_report.h"

#include <gtest/gtest.h>

#include "workload/report_files.h"

namespace kvgate::workload {
namespace {

// A warm-up stage, a quiet stage and a busy one (the peak, measured from 5 s in).
std::vector<workload::StageInfo> three_stages() {
  return {{2, 0, 10 * kSecond, true},
          {4, 10 * kSecond, 30 * kSecond, false},
          {14, 30 * kSecond, 60 * kSecond, false}};
}

// One scrape every 100 ms: decode KV usage and the prefill queue as functions of time.
template <typename Kv, typename Queue>
PolicyRun sampled_run(std::string name, Kv kv, Queue queue) {
  PolicyRun run;
  run.policy = std::move(name);
  for (Nanos t = 0; t <= 60 * kSecond; t += 100 * kMillisecond) {
    run.samples.push_back({.at = t,
                           .decode_kv_usage = kv(t),
                           .prefill_queued_tokens = queue(t),
                           .prefill_busy = queue(t) > 0 ? 1.0 : 0.0});
  }
  return run;
}

TEST(PdLoadReport, MeasuresThePeakStagesPastTheirRamp) {
  const auto spans = measured_spans(three_stages());
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].from, 35 * kSecond);
  EXPECT_EQ(spans[0].to, 60 * kSecond);
  // Two stages at the peak rate: both measured.
  auto two = three_stages();
  two.push_back({14, 60 * kSecond, 90 * kSecond, false});
  EXPECT_EQ(measured_spans(two).size(), 2u);
  // No stages: the whole run.
  ASSERT_EQ(measured_spans({}).size(), 1u);
  EXPECT_EQ(measured_spans({})[0].to, 0);
}

TEST(PdLoadReport, AntiPhaseSwingAgainstAFlatLoad) {
  // Naive: decode swings between 30% and 90% every 2 s, the prefill queue in anti-phase.
  // Outside the measured span it does something else entirely, which must not count.
  auto high = [](Nanos t) { return (t / (2 * kSecond)) % 2 == 0; };
  PolicyRun naive = sampled_run(
      "naive", [&](Nanos t) { return t < 35 * kSecond ? 0.0
                                     : high(t)        ? 0.9
                                                      : 0.3; },
      [&](Nanos t) { return t < 35 * kSecond ? 50000.0
                            : high(t)        ? 0.0
                                             : 20000.0; });
  // Predicted: flat at 80%, a steady queue (a quiet first stage at another level).
  PolicyRun flat = sampled_run(
      "predicted", [](Nanos t) { return t < 30 * kSecond ? 0.2 : 0.8; },
      [](Nanos) { return 8000.0; });
  Summary sn, sp;
  sn.requests = sp.requests = 100;
  sn.completed = 60;
  sn.rejected = 40;
  sn.rejected_after_prefill = 15;
  sn.wasted_prefill_tokens = 240000;
  sp.completed = 70;
  sp.rejected = 30;
  const auto rows = summarize_pd_load({naive, flat}, {sn, sp}, three_stages());
  ASSERT_EQ(rows.size(), 2u);
  const PdLoadSummary& n = rows[0];
  const PdLoadSummary& p = rows[1];
  EXPECT_EQ(n.policy, "naive");
  EXPECT_EQ(n.served, 60u);
  EXPECT_EQ(n.rejected_at_door, 25u);
  EXPECT_EQ(n.rejected_after_prefill, 15u);
  EXPECT_EQ(n.wasted_prefill_tokens, 240000u);
  EXPECT_EQ(n.samples, 250u);  // 35 s to 60 s, every 100 ms
  EXPECT_NEAR(n.decode_kv_mean, 0.6, 0.02);
  EXPECT_NEAR(n.decode_kv_sd, 0.3, 0.01);
  EXPECT_NEAR(n.decode_kv_p10, 0.3, 1e-9);
  EXPECT_NEAR(n.decode_kv_p90, 0.9, 1e-9);
  EXPECT_NEAR(n.prefill_queue_mean, 10, 0.5);  // thousands of tokens
  EXPECT_NEAR(n.prefill_queue_sd, 10, 0.1);
  EXPECT_NEAR(n.prefill_busy, 0.5, 0.03);
  EXPECT_NEAR(n.prefill_busy_sd, 0.5, 0.01);  // busy 0 or 1, about half the time each
  EXPECT_NEAR(p.prefill_busy_sd, 0, 1e-9);
  EXPECT_NEAR(n.correlation, -1, 1e-9);
  EXPECT_NEAR(p.decode_kv_mean, 0.8, 1e-9);
  EXPECT_NEAR(p.decode_kv_sd, 0, 1e-9);
  EXPECT_EQ(p.correlation, 0);  // a flat series has no correlation
  const std::string table = pd_load_table(rows);
  EXPECT_NE(table.find("naive"), std::string::npos);
  EXPECT_NE(table.find("-1.00"), std::string::npos);
  const std::string csv = pd_load_csv(rows);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("naive,100,60,25,15,240000,"), std::string::npos);
}

TEST(PdLoadReport, StepsBetweenStagesAreNotSwings) {
  // Two peak stages at different but steady levels: no oscillation within either.
  auto stages = three_stages();
  stages.push_back({14, 60 * kSecond, 90 * kSecond, false});
  PolicyRun run = sampled_run(
      "steps", [](Nanos t) { return t < 60 * kSecond ? 0.5 : 0.9; },
      [](Nanos t) { return t < 60 * kSecond ? 1000.0 : 9000.0; });
  for (Nanos t = 60 * kSecond + 100 * kMillisecond; t <= 90 * kSecond; t += 100 * kMillisecond)
    run.samples.push_back({.at = t, .decode_kv_usage = 0.9, .prefill_queued_tokens = 9000});
  const auto rows = summarize_pd_load({run}, {Summary{}}, stages);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].decode_kv_mean, 0.7, 0.02);
  EXPECT_NEAR(rows[0].decode_kv_sd, 0, 1e-9);
  EXPECT_NEAR(rows[0].prefill_queue_sd, 0, 1e-9);
  EXPECT_TRUE(has_pd_samples({run}));
  EXPECT_FALSE(has_pd_samples({PolicyRun{}}));
}

TEST(PdLoadReport, ChartsHaveOnePanelPerPolicy) {
  ScenarioResults r;
  r.scenario = "x";
  r.stages = three_stages();
  r.runs.push_back(sampled_run(
      "a", [](Nanos) { return 0.5; }, [](Nanos) { return 0.0; }));
  r.runs.push_back(sampled_run(
      "b", [](Nanos) { return 0.7; }, [](Nanos) { return 0.0; }));
  const PdZoom zoom = pd_zoom_window(r);
  EXPECT_EQ(zoom.from, 40 * kSecond);  // 10 s into the busiest stage
  EXPECT_EQ(zoom.to, 60 * kSecond);
  for (const std::string& svg : {pd_load_over_time_svg(r), pd_load_zoom_svg(r)}) {
    // An outer document and one nested chart per policy.
    size_t n = 0;
    for (size_t at = svg.find("<svg"); at != std::string::npos; at = svg.find("<svg", at + 1)) ++n;
    EXPECT_EQ(n, 3u);
    EXPECT_NE(svg.find("a: decode KV usage"), std::string::npos);
    EXPECT_NE(svg.find("b: decode KV usage"), std::string::npos);
    EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
  }
}

}  // namespace
}  // namespace kvgate::workload

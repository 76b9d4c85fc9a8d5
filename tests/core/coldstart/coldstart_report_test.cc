#include "core/coldstart/coldstart_report.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "core/coldstart/report_render.h"

namespace kvgate::coldstart {
namespace {

// Three cold runs and two with caches kept, two phases.
ColdstartReport sample_report() {
  ColdstartReport r;
  r.command = "vllm serve m";
  r.health_url = "http://127.0.0.1:8000/health";
  r.patterns = "vllm";
  r.phase_names = {"weight_load", "torch_compile"};
  r.phase_labels = {"weight load", "torch.compile & <co>"};
  r.runs = {
      {1, CacheState::kCold, {11, 24}, 200, "ok"},
      {2, CacheState::kCachesKept, {6, 2}, 68, "ok"},
      {3, CacheState::kCachesKept, {5, std::nullopt}, 75, "ok"},
      {4, CacheState::kCold, {10, 20}, 189, "ok"},
      {5, CacheState::kCold, {18, 25}, 204, "ok"},
  };
  return r;
}

TEST(ColdstartReportTest, FormatsCellsWithFittingPrecision) {
  EXPECT_EQ(format_cell(Summary{4, 200, 189, 204}), "200 s (189-204)");
  EXPECT_EQ(format_cell(Summary{4, 4, 3, 6}), "4.0 s (3.0-6.0)");
  EXPECT_EQ(format_cell(Summary{3, 0.28, 0.27, 0.3}), "0.28 s (0.27-0.30)");
  EXPECT_EQ(format_cell(Summary{3, 0.04, 0.039, 0.041}), "0.040 s (0.039-0.041)");
}

TEST(ColdstartReportTest, TableHasAColumnPerCacheStateAndTimeToHealth) {
  std::string table = format_table(sample_report());
  EXPECT_EQ(table,
            "phase                  cold, 3 runs      caches kept, 2 runs\n"
            "weight load            11 s (10-18)      5.5 s (5.0-6.0)\n"
            "torch.compile & <co>   24 s (20-25)      2.0 s (2.0-2.0) [1/2 runs]\n"
            "time to /health        200 s (189-204)   72 s (68-75)\n");
}

TEST(ColdstartReportTest, WarnsWhenRunsDifferByMoreThanTwentyPercent) {
  std::vector<std::string> w = spread_warnings(sample_report(), 0.2);
  // cold weight load: (18-10)/11 = 73%; caches kept weight load: (6-5)/5.5 = 18%: no.
  // cold torch.compile: 5/24 = 21%: yes. time to /health: 7.5% and 9.7%: no.
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], "cold runs differ by 73% (more than 20%) in weight load: 11 s (10-18)");
  EXPECT_NE(w[1].find("torch.compile"), std::string::npos);
  EXPECT_TRUE(spread_warnings(sample_report(), 1.0).empty());
}

TEST(ColdstartReportTest, JsonHasRunsSummaryAndWarnings) {
  boost::json::value v = boost::json::parse(report_json(sample_report(), 0.2));
  const auto& root = v.as_object();
  EXPECT_EQ(root.at("patterns").as_string(), "vllm");
  const auto& runs = root.at("runs").as_array();
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[1].at("cache").as_string(), "caches-kept");
  EXPECT_TRUE(runs[2].at("phases").at("torch_compile").is_null());
  EXPECT_DOUBLE_EQ(runs[0].at("time_to_health_s").as_double(), 200);
  const auto& summary = root.at("summary").as_array();
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[0].at("cache").as_string(), "cold");
  const auto& health = summary[0].at("rows").as_array().back();
  EXPECT_EQ(health.at("name").as_string(), "time_to_health");
  EXPECT_DOUBLE_EQ(health.at("median_s").as_double(), 200);
  EXPECT_DOUBLE_EQ(health.at("min_s").as_double(), 189);
  EXPECT_EQ(root.at("warnings").as_array().size(), 2u);
}

TEST(ColdstartReportTest, SvgIsAStandaloneBarChart) {
  std::string svg = report_svg(sample_report());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("torch.compile &amp; &lt;co&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(svg.find("<co>"), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  // One bar per row and column (3 rows x 2 columns) plus background and 2 legend swatches.
  size_t rects = 0;
  for (size_t at = 0; (at = svg.find("<rect", at)) != std::string::npos; ++at) ++rects;
  EXPECT_EQ(rects, 3u * 2u + 1u + 2u);
  EXPECT_NE(svg.find("<title>time to /health: 200 s (189-204)</title>"), std::string::npos);
  // Bars scale with the largest maximum (204 s = the full plot width, 520 px).
  EXPECT_NE(svg.find("204 s</text>"), std::string::npos);
  size_t open = 0, close = 0;
  for (char c : svg) {
    open += c == '<';
    close += c == '>';
  }
  EXPECT_EQ(open, close);
}

TEST(ColdstartReportTest, RunsThatNeverAnsweredShowAsMissing) {
  ColdstartReport r;
  r.phase_names = {"a"};
  r.runs = {{1, CacheState::kCold, {std::nullopt}, std::nullopt, "timed out after 5 s"}};
  std::string table = format_table(r);
  EXPECT_NE(table.find("a                 -"), std::string::npos) << table;
  EXPECT_NE(report_svg(r).find("not seen"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::coldstart

namespace kvgate::coldstart {
namespace {

TEST(ColdstartReportTest, RunsWithoutNamedCachesAreJustRuns) {
  ColdstartReport r;
  r.phase_names = {"a"};
  r.runs = {{1, CacheState::kUnmanaged, {1.0}, 2.0, "ok"},
            {2, CacheState::kUnmanaged, {1.5}, 2.5, "ok"}};
  EXPECT_EQ(column_title(CacheState::kUnmanaged, 2), "2 runs");
  EXPECT_EQ(column_title(CacheState::kCachesKept, 1), "caches kept, 1 run");
  std::string table = format_table(r);
  EXPECT_EQ(table.substr(0, table.find('\n')), "phase             2 runs");
  std::vector<std::string> w = spread_warnings(r, 0.2);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rfind("runs differ by 40%", 0), 0u) << w[0];
}

}  // namespace
}  // namespace kvgate::coldstart

#include "workload/csv.h"

#include <gtest/gtest.h>

#include "workload/report.h"

namespace kvgate::workload {
namespace csv_test {

TEST(CsvField, PlainTextIsWrittenAsItIs) {
  EXPECT_EQ(csv_field("kv-cost"), "kv-cost");
  EXPECT_EQ(csv_field("queue+shed"), "queue+shed");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("B alone"), "B alone");
}

TEST(CsvField, QuotesWhatRfc4180Requires) {
  EXPECT_EQ(csv_field("on, late_binding any"), "\"on, late_binding any\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("a\nb"), "\"a\nb\"");
  EXPECT_EQ(csv_field("a\rb"), "\"a\rb\"");
  EXPECT_EQ(csv_field("\""), "\"\"\"\"");
}

// A run name with a comma and a quote stays one field of summary.csv and stages.csv:
// the row has as many fields (outside quotes) as the header.
size_t fields_outside_quotes(std::string_view line) {
  size_t n = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++n;
  }
  return n;
}

TEST(CsvField, SummaryRowsKeepTheirWidth) {
  Summary s;
  s.policy = "on, \"late\" binding";
  s.stages.push_back({});
  for (const std::string& csv : {summary_csv({s}), stages_csv({s})}) {
    const size_t eol = csv.find('\n');
    ASSERT_NE(eol, std::string::npos);
    const std::string_view header(csv.data(), eol);
    const std::string_view row(csv.data() + eol + 1, csv.size() - eol - 2);
    EXPECT_EQ(fields_outside_quotes(row), fields_outside_quotes(header)) << csv;
    EXPECT_EQ(row.substr(0, 22), "\"on, \"\"late\"\" binding\"") << csv;
  }
}

}  // namespace csv_test
}  // namespace kvgate::workload

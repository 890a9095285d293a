// The HTML run report: well-formed, self-contained, escaped, proportional.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gpemu/error.h"
#include "gpemu/report.h"
#include "report/configuration_rows.h"
#include "support/html_check.h"

namespace gpemu {
namespace {

using test::check_html;

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Everything a self-contained page must not have.
void expect_self_contained(const std::string& page) {
  EXPECT_EQ(page.find("http"), std::string::npos) << "a URL in the page";
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("@font-face"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<iframe"), std::string::npos);
}

void expect_valid(const std::string& page) {
  test::HtmlCheck c = check_html(page);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.opened["html"], 1);
  EXPECT_EQ(c.opened["head"], 1);
  EXPECT_EQ(c.opened["body"], 1);
  EXPECT_EQ(c.opened["title"] >= 1, true);
  EXPECT_EQ(page.find("<meta charset=\"utf-8\">"), page.find("<meta"));  // charset first
  expect_self_contained(page);
}

struct Seg {
  double x, width;
  std::string fill, title;
};

// The stacked segments (<rect class="seg">) in emission order.
std::vector<Seg> segments(const std::string& page) {
  static const std::regex re(
      R"re(<rect class="seg" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="(#[0-9A-Fa-f]{6})"><title>([^<]*)</title>)re");
  std::vector<Seg> out;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), re); it != std::sregex_iterator(); ++it) {
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), (*it)[3], (*it)[4]});
  }
  return out;
}

RunReport example_report() {
  RunReport r;
  r.title = "ResNet-50 on 4\u00d7 A100-SXM4-40GB \u2014 batch 256, 8 loader workers";
  r.generator = "gpemu 0.1.0 (gpemu train --report)";
  r.generated_at = "2024-05-01 12:00 UTC";
  r.summary = {{"epoch time", "412.3 s"},
               {"samples/s", "3,105"},
               {"GPU utilization (mean)", "73.4%"},
               {"data stall share", "21.8%"},
               {"H2D share", "4.9%"},
               {"peak GPU memory", "31.2 GiB of 40 GiB"},
               {"emulated GPUs", "4\u00d7 A100-SXM4-40GB, NVSwitch"}};
  const char* gpus[] = {"GPU 0", "GPU 1", "GPU 2", "GPU 3"};
  for (int g = 0; g < 4; ++g) {
    double skew = g * 6.5;
    r.breakdown.push_back({gpus[g],
                           {{"compute", 301.2 - skew},
                            {"H2D", 20.4},
                            {"data stall", 61.7 + skew * 1.6},
                            {"communication", 24.1},
                            {"idle", 4.9 + g}}});
  }
  // Utilization from synthetic busy intervals: an iteration every ~130 ms,
  // slower while the page cache warms up, one GPU with stalls mid-run.
  for (int g = 0; g < 4; ++g) {
    std::vector<BusyInterval> busy;
    Time t = 0;
    unsigned seed = 12345u + static_cast<unsigned>(g) * 977u;
    int i = 0;
    while (t < 60 * kSecond) {
      seed = seed * 1103515245u + 12345u;
      Duration jitter = static_cast<Duration>((seed >> 8) % 40) * kMillisecond;
      Duration stall = t < 8 * kSecond ? 120 * kMillisecond : 20 * kMillisecond + jitter;
      if (g == 2 && t > 30 * kSecond && t < 36 * kSecond) stall += 150 * kMillisecond;
      t += stall;
      busy.push_back({t, t + 95 * kMillisecond});
      t += 95 * kMillisecond;
      ++i;
    }
    r.utilization.push_back(utilization_from_intervals(gpus[g], busy, 500 * kMillisecond, 0, 60 * kSecond));
  }
  BatchSeries stall{"data stall per batch", "ms", {}, 0};
  unsigned seed = 7;
  for (int b = 0; b < 612; ++b) {
    seed = seed * 1664525u + 1013904223u;
    double v = 18 + static_cast<double>((seed >> 10) % 1000) / 100.0;
    if (b < 60) v += 110 - b * 1.5;
    if (b % 97 == 0) v += 80;
    stall.values.push_back(v);
  }
  r.per_batch.push_back(stall);
  r.stall_shares = StallShares{.fetch_stall = 0.124, .prep_stall = 0.094, .compute = 0.731};
  r.configuration = configuration_rows(
      nlohmann::json{{"model", {{"name", "resnet50"}, {"batch_size", 256}, {"amp", true}}},
                     {"gpu", {{"name", "A100-SXM4-40GB"}, {"count", 4}, {"capacity_gib", 40}}},
                     {"loader", {{"workers", 8}, {"pin_memory", true}, {"prefetch_factor", 2}}},
                     {"dataset", {{"name", "imagenet-1k"}, {"samples", 1281167}, {"cache", "page cache, 64 GiB"}}},
                     {"clock", "virtual"},
                     {"seed", 42}});
  r.notes = {"Emulated run: no real GPU was used; times come from the A100 profile.",
             "The first 60 batches read from storage while the page cache was cold (fetch stall)."};
  return r;
}

TEST(HtmlReport, ExampleIsWellFormedAndSelfContained) {
  RunReport r = example_report();
  std::string page = render_html_report(r);
  expect_valid(page);
  test::HtmlCheck c = check_html(page);
  // breakdown, utilization, one per-batch chart, stall shares
  EXPECT_EQ(c.opened["svg"], 4);
  for (const char* id :
       {"summary", "breakdown", "utilization", "per-batch", "stall-shares", "configuration", "notes"}) {
    EXPECT_NE(page.find(std::string("<section id=\"") + id + "\">"), std::string::npos) << id;
    EXPECT_NE(page.find(std::string("<a href=\"#") + id + "\">"), std::string::npos) << id;
  }
  // Every chart has a tooltip title; every segment and bar has one.
  EXPECT_EQ(count(page, "<svg"), count(page, "role=\"img\">\n<title>"));
  EXPECT_EQ(count(page, "<rect class=\"seg\""), 4 * 5 + 4);  // 4 GPUs x 5 components; fetch, prep, compute, other
  EXPECT_NE(page.find("2024-05-01 12:00 UTC"), std::string::npos);

  // write_html_report to a stream gives the same bytes.
  std::ostringstream os;
  write_html_report(r, os);
  EXPECT_EQ(os.str(), page);

  // Rendering is deterministic.
  EXPECT_EQ(render_html_report(r), page);

  // Set GPEMU_REPORT_EXAMPLE=/tmp/gpemu-report-example.html to look at it.
  if (const char* path = std::getenv("GPEMU_REPORT_EXAMPLE")) write_html_report_file(r, path);
}

TEST(HtmlReport, UserTextIsEscapedEverywhere) {
  const std::string evil = "<script>alert(\"x\")</script> & 'co' <b>";
  RunReport r;
  r.title = evil;
  r.generator = evil;
  r.generated_at = evil;
  r.summary = {{evil, evil}};
  r.breakdown = {{evil, {{evil, 1.0}, {"compute", 2.0}}}};
  r.utilization = {{evil, {{0.0, 0.5}, {1.0, 1.0}}, 2.0}};
  r.per_batch = {{evil, evil, {1, 2, 3}, 0}};
  r.stall_shares = StallShares{0.1, 0.2, 0.6};
  r.configuration = configuration_rows(nlohmann::json{{evil, evil}, {"nested", {{evil, {1, 2}}}}});
  r.notes = {evil};
  std::string page = render_html_report(r);
  expect_valid(page);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<b>&"), std::string::npos);
  EXPECT_EQ(page.find("'co'"), std::string::npos);
  EXPECT_NE(page.find("<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39; &lt;b&gt;</title>"),
            std::string::npos);
  EXPECT_NE(page.find("<h1>&lt;script&gt;"), std::string::npos);
  EXPECT_GE(count(page, "&lt;script&gt;"), 10);
}

TEST(HtmlReport, EscapeFunction) {
  EXPECT_EQ(html_escape("a<b>&\"c'd"), "a&lt;b&gt;&amp;&quot;c&#39;d");
  EXPECT_EQ(html_escape("tab\tnl\nnul\x01"
                        "bell\x07"
                        "del\x7f"
                        "!"),
            "tab\tnl\nnulbelldel!");
  EXPECT_EQ(html_escape("caf\u00e9 \u00b5s"), "caf\u00e9 \u00b5s");  // UTF-8 passes through
}

TEST(HtmlReport, BarWidthsAreProportional) {
  RunReport r;
  r.breakdown = {{"GPU 0", {{"compute", 3.0}, {"H2D", 1.0}}}, {"GPU 1", {{"compute", 1.0}, {"H2D", 1.0}}}};
  std::string page = render_html_report(r);
  expect_valid(page);
  std::vector<Seg> s = segments(page);
  ASSERT_EQ(s.size(), 4u);
  // GPU 0: compute 3x H2D, stacked left to right.
  EXPECT_NEAR(s[0].width / s[1].width, 3.0, 1e-3);
  EXPECT_NEAR(s[1].x, s[0].x + s[0].width, 0.011);
  // GPU 1 (2 s) is half as long as GPU 0 (4 s), same scale.
  EXPECT_NEAR((s[2].width + s[3].width) / (s[0].width + s[1].width), 0.5, 1e-3);
  EXPECT_NEAR(s[2].width, s[1].width, 0.011);
  EXPECT_EQ(s[0].x, s[2].x);
  // Same component, same colour; different components, different colours.
  EXPECT_EQ(s[0].fill, s[2].fill);
  EXPECT_EQ(s[1].fill, s[3].fill);
  EXPECT_NE(s[0].fill, s[1].fill);
  // Percentages: in the tooltips and the legend.
  EXPECT_NE(s[0].title.find("GPU 0 \u00b7 compute: 3 s (75.0% of 4 s)"), std::string::npos) << s[0].title;
  EXPECT_NE(s[1].title.find("(25.0% of 4 s)"), std::string::npos) << s[1].title;
  EXPECT_NE(page.find(">75%</text>"), std::string::npos);
  EXPECT_NE(page.find("compute <b>66.7%</b>"), std::string::npos);  // 4 of 6 s over both GPUs
  EXPECT_NE(page.find("H2D <b>33.3%</b>"), std::string::npos);
}

TEST(HtmlReport, StallSharesBarAddsOtherAndScales) {
  RunReport r;
  r.stall_shares = StallShares{0.25, 0.125, 0.5};
  std::string page = render_html_report(r);
  expect_valid(page);
  std::vector<Seg> s = segments(page);
  ASSERT_EQ(s.size(), 4u);  // fetch, prep, compute, other
  double total = 0;
  for (const Seg& g : s) total += g.width;
  EXPECT_NEAR(s[0].width / total, 0.25, 1e-4);
  EXPECT_NEAR(s[1].width / total, 0.125, 1e-4);
  EXPECT_NEAR(s[2].width / total, 0.5, 1e-4);
  EXPECT_NEAR(s[3].width / total, 0.125, 1e-4);
  EXPECT_NE(s[3].title.find("other: 12.5%"), std::string::npos);
  // Colours carry meaning: stalls warm, compute blue, the rest grey.
  EXPECT_EQ(s[0].fill, "#D55E00");
  EXPECT_EQ(s[1].fill, "#E69F00");
  EXPECT_EQ(s[2].fill, "#0072B2");
  EXPECT_EQ(s[3].fill, "#888888");
  EXPECT_NE(page.find("Data stall (fetch + prep) = <b>37.5%</b>"), std::string::npos);

  r.stall_shares = StallShares{0.5, 0.5, 1.0};  // sums to 2: scaled
  page = render_html_report(r);
  expect_valid(page);
  s = segments(page);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_NEAR(s[2].width / (s[0].width + s[1].width + s[2].width), 0.5, 1e-4);
  EXPECT_NE(page.find("summed to 200.0%"), std::string::npos);
}

TEST(HtmlReport, EmptyReportIsAValidPage) {
  RunReport r;
  r.title.clear();
  r.generator.clear();
  r.configuration = configuration_rows(nullptr);
  std::string page = render_html_report(r);
  expect_valid(page);
  test::HtmlCheck c = check_html(page);
  EXPECT_EQ(c.opened["svg"], 0);
  EXPECT_NE(page.find("No per-GPU time breakdown was recorded."), std::string::npos);
  EXPECT_NE(page.find("No utilization samples were recorded."), std::string::npos);
  EXPECT_NE(page.find("<h1>gpemu run report</h1>"), std::string::npos);
  EXPECT_EQ(page.find("id=\"configuration\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"notes\""), std::string::npos);
}

TEST(HtmlReport, GpusWithoutSamplesOrTimeStillValid) {
  RunReport r;
  r.breakdown = {{"GPU 0", {}}, {"GPU 1", {{"compute", 0.0}, {"idle", -3.0}}}};
  r.utilization = {{"GPU 0", {}, 0.0}, {"GPU 1", {{5.0, 0.5}}, 0.0}};
  r.per_batch = {{"data stall", "ms", {}, 0}, {"loss", "", {std::nan(""), 1.0}, 10}};
  r.stall_shares = StallShares{0, 0, 0};
  std::string page = render_html_report(r);
  expect_valid(page);
  EXPECT_EQ(page.find("nan"), std::string::npos);
  EXPECT_EQ(page.find("inf"), std::string::npos);
  EXPECT_NE(page.find("no samples"), std::string::npos);
  EXPECT_NE(page.find("No batches recorded."), std::string::npos);
  for (const Seg& s : segments(page)) EXPECT_GE(s.width, 0.0);
}

TEST(HtmlReport, UtilizationChartShowsMeanAndAxes) {
  RunReport r;
  std::vector<BusyInterval> busy = {{0, kSecond}, {2 * kSecond, 3 * kSecond}};
  r.utilization.push_back(utilization_from_intervals("GPU 0", busy, kSecond, 0, 4 * kSecond));
  std::string page = render_html_report(r);
  expect_valid(page);
  EXPECT_NE(page.find("GPU 0: mean utilization 50.0% over 0\u20134 s"), std::string::npos);
  EXPECT_NE(page.find(">50.0%</text>"), std::string::npos);  // mean label at the right
  EXPECT_NE(page.find(">time (s)</text>"), std::string::npos);
  for (const char* tick : {">0%</text>", ">50%</text>", ">100%</text>"}) EXPECT_NE(page.find(tick), std::string::npos);
  EXPECT_NE(page.find("GPU 0, 1\u20132 s: 0.0% busy"), std::string::npos);  // per-bucket tooltip
}

TEST(HtmlReport, PerBatchChartBinsLongSeries) {
  RunReport r;
  BatchSeries s{"data stall per batch", "ms", {}, 0};
  for (int i = 0; i < 1000; ++i) s.values.push_back(i % 10 == 0 ? 50.0 : 10.0);
  r.per_batch.push_back(s);
  std::string page = render_html_report(r);
  expect_valid(page);
  // 1000 batches -> bins of 4 -> 250 bars.
  EXPECT_EQ(count(page, "<rect class=\"bar\""), 250);
  EXPECT_NE(page.find("each bar is the mean of 4 batches"), std::string::npos);
  EXPECT_NE(page.find("1000 batches, in ms: mean 14 ms"), std::string::npos);

  r.per_batch[0].values.resize(20);
  page = render_html_report(r);
  EXPECT_EQ(count(page, "<rect class=\"bar\""), 20);
  EXPECT_NE(page.find("<title>batch 10: 50 ms</title>"), std::string::npos);
}

TEST(HtmlReport, ConfigurationIsFlattened) {
  RunReport r;
  r.configuration = configuration_rows(nlohmann::json{{"model", {{"name", "resnet50"}, {"batch_size", 256}}},
                                                      {"gpus", {"A100", "V100"}},
                                                      {"stages", {{{"name", "decode"}}, {{"name", "crop"}}}}});
  std::string page = render_html_report(r);
  expect_valid(page);
  EXPECT_NE(page.find("<tr><th>model.batch_size</th><td>256</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<tr><th>model.name</th><td>resnet50</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<tr><th>gpus</th><td>[&quot;A100&quot;,&quot;V100&quot;]</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<tr><th>stages[1].name</th><td>crop</td></tr>"), std::string::npos);
}

TEST(HtmlReport, WriteFileReportsBadPath) {
  EXPECT_THROW(write_html_report_file(RunReport{}, "/nonexistent-dir/x/report.html"), InputError);
  auto path = std::filesystem::temp_directory_path() / "gpemu_report_test.html";
  write_html_report_file(RunReport{}, path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), render_html_report(RunReport{}));
  std::filesystem::remove(path);
}

TEST(HtmlChecker, RejectsBrokenHtml) {
  const std::string head = "<!DOCTYPE html>\n<html><body>";
  EXPECT_TRUE(check_html(head + "<p>a &amp; b</p></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<p>a & b</p></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<p>a < b</p></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<p><b>x</p></b></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<svg><rect/></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<p class=x>y</p></body></html>").ok);
  EXPECT_FALSE(check_html(head + "<script>1</script></body></html>").ok);
  EXPECT_FALSE(check_html("<html></html>").ok);
}

}  // namespace
}  // namespace gpemu

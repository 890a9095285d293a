// The HTML run report: one self-contained page, charts as hand-written SVG
// (with the drawing kit of chart_kit.h).
//
// Everything is appended to one std::string and written at the end. Every
// piece of text that comes from the report goes through html_escape; numbers
// are formatted here. The page has no <script>, no URL and no external font.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "gpemu/error.h"
#include "gpemu/report.h"
#include "report/chart_kit.h"

namespace gpemu {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        if (c == 0x7f) break;
        out += c;
    }
  }
  return out;
}

namespace {

using namespace chart;  // the drawing kit (chart_kit.h) the page is made with

// ---------------------------------------------------------------- CSS

constexpr std::string_view kCss = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f6f8; color: #1d232b;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #1f2d3d; color: #ffffff; padding: 20px 32px 14px; }
header h1 { margin: 0 0 4px; font-size: 24px; font-weight: 600; overflow-wrap: anywhere; }
header .meta { margin: 0; color: #c8d2dd; font-size: 13px; }
nav { margin-top: 10px; font-size: 13px; }
nav a { color: #ffffff; margin-right: 16px; text-decoration: none; border-bottom: 1px solid #7f8fa1; }
main { max-width: 1040px; margin: 0 auto; padding: 8px 24px 24px; }
section { background: #ffffff; border: 1px solid #dce1e7; border-radius: 8px; padding: 14px 20px 16px; margin: 16px 0; }
h2 { font-size: 18px; margin: 0 0 6px; }
h3 { font-size: 15px; margin: 16px 0 2px; }
p.caption { color: #4a5561; font-size: 13px; margin: 0 0 6px; }
p.empty { color: #6b7682; font-style: italic; margin: 4px 0; }
dl.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 10px; margin: 6px 0 0; }
dl.tiles div { border: 1px solid #e3e7ec; border-left: 4px solid #0072B2; border-radius: 6px; padding: 8px 12px; background: #fafbfc; }
dl.tiles dt { color: #4a5561; font-size: 13px; }
dl.tiles dd { margin: 2px 0 0; font-size: 19px; font-weight: 600; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
table.kv th { text-align: left; font-weight: 400; color: #4a5561; padding: 5px 32px 5px 0; vertical-align: top; }
table.kv td { font-weight: 600; padding: 5px 0; overflow-wrap: anywhere; }
table.kv tr + tr > * { border-top: 1px solid #edf0f3; }
table.config td { font-weight: 400; }
table.config th { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; color: #1d232b; }
table.grid { margin-top: 6px; }
table.grid th, table.grid td { padding: 3px 12px; text-align: right; border-bottom: 1px solid #edf0f3; }
table.grid th { font-weight: 600; color: #4a5561; }
table.grid th:first-child, table.grid td:first-child { text-align: left; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 20px; margin: 4px 0 6px; padding: 0; list-style: none; font-size: 13px; }
.legend li { display: flex; align-items: center; gap: 6px; }
.swatch { width: 13px; height: 13px; border-radius: 2px; display: inline-block; border: 1px solid #00000040; }
svg.chart { display: block; width: 100%; max-width: 960px; height: auto; margin: 4px 0; }
svg.chart text { font-family: inherit; font-size: 12px; fill: #1d232b; }
svg.chart .tick { fill: #4a5561; font-size: 11px; }
svg.chart .axis { stroke: #8a949e; stroke-width: 1; }
svg.chart .grid { stroke: #e4e8ed; stroke-width: 1; }
svg.chart .halo { paint-order: stroke; stroke: #ffffff; stroke-width: 3px; stroke-linejoin: round; }
svg.chart .mean { stroke: #1d232b; stroke-width: 1; stroke-dasharray: 4 3; }
svg.chart .seg:hover, svg.chart .bar:hover { opacity: 0.75; }
svg.chart .hover { fill: transparent; }
svg.chart .hover:hover { fill: #1d232b18; }
details summary { cursor: pointer; color: #4a5561; font-size: 13px; margin-top: 4px; }
ul.notes { margin: 4px 0; padding-left: 20px; }
ul.notes li { margin: 4px 0; white-space: pre-wrap; overflow-wrap: anywhere; }
footer { text-align: center; color: #6b7682; font-size: 12px; padding: 0 0 24px; }
)css";

// ---------------------------------------------------------------- sections

void summary_section(Buf& b, const RunReport& r) {
  b += "<section id=\"summary\">\n<h2>Summary</h2>\n<dl class=\"tiles\">\n";
  for (const SummaryRow& row : r.summary) put(b, "<div><dt>{}</dt><dd>{}</dd></div>\n", esc(row.key), esc(row.value));
  b += "</dl>\n</section>\n";
}

void breakdown_section(Buf& b, const RunReport& r) {
  b += "<section id=\"breakdown\">\n<h2>Time breakdown per GPU</h2>\n";
  if (r.breakdown.empty()) {
    b += "<p class=\"empty\">No per-GPU time breakdown was recorded.</p>\n</section>\n";
    return;
  }
  // Component names in first-seen order, with their totals over all GPUs.
  std::vector<std::string> names;
  std::vector<double> name_total;
  std::vector<double> gpu_total(r.breakdown.size(), 0.0);
  for (std::size_t g = 0; g < r.breakdown.size(); ++g) {
    for (const TimeComponent& tc : r.breakdown[g].components) {
      auto it = std::find(names.begin(), names.end(), tc.name);
      std::size_t k = static_cast<std::size_t>(it - names.begin());
      if (it == names.end()) {
        names.push_back(tc.name);
        name_total.push_back(0);
      }
      name_total[k] += nonneg(tc.seconds);
      gpu_total[g] += nonneg(tc.seconds);
    }
  }
  Palette pal(names);
  const double grand = std::accumulate(gpu_total.begin(), gpu_total.end(), 0.0);
  const double max_total = *std::max_element(gpu_total.begin(), gpu_total.end());

  put(b,
      "<p class=\"caption\">Where each GPU's time went, in seconds. Legend shares are of all GPUs' time together "
      "({}).</p>\n",
      esc(fmt_seconds(grand)));
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t k = 0; k < names.size(); ++k) {
    items.emplace_back(pal.color(names[k]), fmt::format("{} <b>{}</b>", esc(names[k]),
                                                        grand > 0 ? fmt_pct(name_total[k] / grand) : "\u2013"));
  }
  legend(b, items);

  const double left = 120, right = 80, top = 8, row_h = 32, bar_h = 22, axis_h = 40;
  const double pw = kW - left - right;
  const double rows_h = static_cast<double>(r.breakdown.size()) * row_h;
  const double h = top + rows_h + axis_h;
  Ticks ticks = nice_ticks(0, max_total > 0 ? max_total : 1, 8, true);
  const double axis_max = ticks.values.back() > 0 ? ticks.values.back() : 1;
  const double scale = pw / axis_max;

  svg_open(b, h, "Time breakdown per GPU (stacked, seconds)");
  for (double t : ticks.values) {
    double x = left + t * scale;
    put(b, "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(x), c(top), c(x), c(top + rows_h));
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", c(x), c(top + rows_h + 16),
        tick_label(ticks, t));
  }
  put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(left), c(top + rows_h), c(left + pw),
      c(top + rows_h));
  put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time (s)</text>\n", c(left + pw / 2),
      c(top + rows_h + 34));

  for (std::size_t g = 0; g < r.breakdown.size(); ++g) {
    const GpuTimeBreakdown& gb = r.breakdown[g];
    const double y = top + static_cast<double>(g) * row_h + (row_h - bar_h) / 2;
    put(b, "<g>\n<title>{}: {} in total</title>\n", esc(gb.gpu), esc(fmt_seconds(gpu_total[g])));
    put(b, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", c(left - 10), c(y + bar_h / 2 + 4),
        esc(truncate(gb.gpu, 16)));
    double x = left;
    for (const TimeComponent& tc : gb.components) {
      const double s = nonneg(tc.seconds);
      const double w = s * scale;
      const double share = gpu_total[g] > 0 ? s / gpu_total[g] : 0;
      const std::string& col = pal.color(tc.name);
      put(b,
          "<rect class=\"seg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} \u00b7 {}: {} ({} of "
          "{})</title></rect>\n",
          c(x), c(y), c(w), c(bar_h), col, esc(gb.gpu), esc(tc.name), esc(fmt_seconds(s)), fmt_pct(share),
          esc(fmt_seconds(gpu_total[g])));
      std::string label = fmt_pct(share, 0);
      if (w >= text_width(label, 11) + 8) {
        put(b,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"font-size:11px;fill:{}\" "
            "pointer-events=\"none\">{}</text>\n",
            c(x + w / 2), c(y + bar_h / 2 + 4), ink_on(col), label);
      }
      x += w;
    }
    put(b, "<text x=\"{}\" y=\"{}\">{}</text>\n</g>\n", c(x + 6), c(y + bar_h / 2 + 4), esc(fmt_seconds(gpu_total[g])));
  }
  b += "</svg>\n";

  // The numbers behind the chart.
  b += "<details>\n<summary>Table</summary>\n<table class=\"grid\">\n<tr><th>GPU</th>";
  for (const std::string& n : names) put(b, "<th>{}</th>", esc(n));
  b += "<th>total</th></tr>\n";
  for (std::size_t g = 0; g < r.breakdown.size(); ++g) {
    put(b, "<tr><td>{}</td>", esc(r.breakdown[g].gpu));
    for (const std::string& n : names) {
      double s = 0;
      for (const TimeComponent& tc : r.breakdown[g].components)
        if (tc.name == n) s += nonneg(tc.seconds);
      put(b, "<td>{} ({})</td>", esc(fmt_seconds(s)), gpu_total[g] > 0 ? fmt_pct(s / gpu_total[g]) : "\u2013");
    }
    put(b, "<td>{}</td></tr>\n", esc(fmt_seconds(gpu_total[g])));
  }
  b += "</table>\n</details>\n</section>\n";
}

// A utilization series made drawable: sorted, clamped, each sample with its
// own end, and at most kMaxPoints steps (consecutive samples merged by their
// time-weighted mean).
struct Step {
  double t0, t1, frac;
};

std::vector<Step> steps_of(const UtilizationSeries& s) {
  std::vector<UtilizationSample> v;
  for (const UtilizationSample& u : s.samples)
    if (std::isfinite(u.time_s)) v.push_back(u);
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.time_s < b.time_s; });
  std::vector<Step> steps;
  for (std::size_t i = 0; i < v.size(); ++i) {
    double t1;
    if (i + 1 < v.size()) {
      t1 = v[i + 1].time_s;
    } else if (std::isfinite(s.end_s) && s.end_s > v[i].time_s) {
      t1 = s.end_s;
    } else if (i > 0) {
      t1 = v[i].time_s + (v[i].time_s - v[i - 1].time_s);
    } else {
      t1 = v[i].time_s + 1;
    }
    steps.push_back({v[i].time_s, t1, clamp01(v[i].busy_fraction)});
  }
  constexpr std::size_t kMaxPoints = 1000;
  if (steps.size() > kMaxPoints) {
    const std::size_t k = (steps.size() + kMaxPoints - 1) / kMaxPoints;
    std::vector<Step> merged;
    for (std::size_t i = 0; i < steps.size(); i += k) {
      const std::size_t j = std::min(steps.size(), i + k);
      double busy = 0, len = 0;
      for (std::size_t m = i; m < j; ++m) {
        busy += steps[m].frac * (steps[m].t1 - steps[m].t0);
        len += steps[m].t1 - steps[m].t0;
      }
      merged.push_back({steps[i].t0, steps[j - 1].t1, len > 0 ? busy / len : steps[i].frac});
    }
    steps = std::move(merged);
  }
  return steps;
}

void utilization_section(Buf& b, const RunReport& r) {
  b += "<section id=\"utilization\">\n<h2>GPU utilization over time</h2>\n";
  if (r.utilization.empty()) {
    b += "<p class=\"empty\">No utilization samples were recorded.</p>\n</section>\n";
    return;
  }
  std::vector<std::vector<Step>> all;
  double t0 = INFINITY, t1 = -INFINITY;
  for (const UtilizationSeries& s : r.utilization) {
    all.push_back(steps_of(s));
    if (!all.back().empty()) {
      t0 = std::min(t0, all.back().front().t0);
      t1 = std::max(t1, all.back().back().t1);
    }
  }
  if (!(t0 < t1)) {
    t0 = 0;
    t1 = 1;
  }
  b +=
      "<p class=\"caption\">Fraction of each interval the GPU was busy (0\u2013100%); the mean is time-weighted.</p>\n";

  const double left = 120, right = 90, top = 10, ph = 52, gap = 22, axis_h = 40;
  const double pw = kW - left - right;
  const double n = static_cast<double>(r.utilization.size());
  const double rows_h = n * (ph + gap) - gap;
  const double h = top + rows_h + axis_h;
  const double xs = pw / (t1 - t0);
  auto X = [&](double t) { return left + (t - t0) * xs; };
  Ticks ticks = nice_ticks(t0, t1, 10, false);

  svg_open(b, h, "GPU utilization over time (busy %)");
  for (double t : ticks.values) {
    put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(X(t)), c(top + rows_h), c(X(t)),
        c(top + rows_h + 4));
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", c(X(t)), c(top + rows_h + 16),
        tick_label(ticks, t));
  }
  put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time (s)</text>\n", c(left + pw / 2),
      c(top + rows_h + 34));

  for (std::size_t g = 0; g < r.utilization.size(); ++g) {
    const UtilizationSeries& s = r.utilization[g];
    const std::vector<Step>& steps = all[g];
    const double y0 = top + static_cast<double>(g) * (ph + gap);
    const double base = y0 + ph;
    auto Y = [&](double f) { return base - f * ph; };
    double busy = 0, len = 0;
    for (const Step& st : steps) {
      busy += st.frac * (st.t1 - st.t0);
      len += st.t1 - st.t0;
    }
    const double mean = len > 0 ? busy / len : 0;
    if (steps.empty()) {
      put(b, "<g>\n<title>{}: no samples</title>\n", esc(s.gpu));
    } else {
      put(b, "<g>\n<title>{}: mean utilization {} over {}\u2013{} s</title>\n", esc(s.gpu), fmt_pct(mean),
          fmt_value(steps.front().t0), fmt_value(steps.back().t1));
    }
    put(b, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f3f6f9\"/>\n", c(left), c(y0), c(pw), c(ph));
    for (double t : ticks.values) {
      put(b, "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(X(t)), c(y0), c(X(t)), c(base));
    }
    put(b, "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke-dasharray=\"3 3\"/>\n", c(left),
        c(Y(0.5)), c(left + pw), c(Y(0.5)));
    put(b, "<text x=\"10\" y=\"{}\" style=\"font-weight:600\">{}</text>\n", c(y0 + ph / 2 + 4),
        esc(truncate(s.gpu, 10)));
    for (double f : {0.0, 0.5, 1.0}) {
      put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}%</text>\n", c(left - 6), c(Y(f) + 4),
          static_cast<int>(f * 100));
    }
    if (steps.empty()) {
      put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no samples</text>\n", c(left + pw / 2),
          c(y0 + ph / 2 + 4));
    } else {
      std::string line = fmt::format("M{},{}", c(X(steps.front().t0)), c(Y(steps.front().frac)));
      for (std::size_t i = 0; i < steps.size(); ++i) {
        if (i > 0) line += fmt::format(" L{},{}", c(X(steps[i].t0)), c(Y(steps[i].frac)));
        line += fmt::format(" L{},{}", c(X(steps[i].t1)), c(Y(steps[i].frac)));
      }
      std::string area = fmt::format("M{},{} {} L{},{} Z", c(X(steps.front().t0)), c(base), "L" + line.substr(1),
                                     c(X(steps.back().t1)), c(base));
      put(b, "<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.30\"/>\n", area, kBlue);
      put(b, "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-linejoin=\"round\"/>\n", line,
          kBlue);
      if (steps.size() <= 240) {
        for (const Step& st : steps) {
          put(b,
              "<rect class=\"hover\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}, {}\u2013{} s: {} "
              "busy</title></rect>\n",
              c(X(st.t0)), c(y0), c(std::max(0.0, X(st.t1) - X(st.t0))), c(ph), esc(s.gpu), fmt_value(st.t0),
              fmt_value(st.t1), fmt_pct(st.frac));
        }
      }
      put(b, "<text x=\"{}\" y=\"{}\" style=\"font-weight:600\">{}</text>\n", c(left + pw + 10), c(y0 + ph / 2 - 2),
          fmt_pct(mean));
      put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\">mean</text>\n", c(left + pw + 10), c(y0 + ph / 2 + 13));
    }
    put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n</g>\n", c(left), c(base), c(left + pw),
        c(base));
  }
  b += "</svg>\n</section>\n";
}

void batch_chart(Buf& b, const BatchSeries& s) {
  Palette pal;
  put(b, "<h3>{}</h3>\n", esc(s.name.empty() ? std::string("per-batch series") : s.name));
  const std::string unit = s.unit.empty() ? std::string() : " " + s.unit;
  std::vector<double> v;
  v.reserve(s.values.size());
  for (double x : s.values) v.push_back(nonneg(x));
  if (v.empty()) {
    b += "<p class=\"empty\">No batches recorded.</p>\n";
    return;
  }
  const std::size_t n = v.size();
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) {
    return sorted[std::min(n - 1, static_cast<std::size_t>(std::ceil(p * n)) - (p > 0 ? 1 : 0))];
  };
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);

  constexpr std::size_t kMaxBars = 300;
  const std::size_t k = n <= kMaxBars ? 1 : (n + kMaxBars - 1) / kMaxBars;
  struct Bin {
    std::size_t first, last;  // indices into v, inclusive
    double mean, max;
  };
  std::vector<Bin> bins;
  for (std::size_t i = 0; i < n; i += k) {
    const std::size_t j = std::min(n, i + k);
    double sum = 0, mx = 0;
    for (std::size_t m = i; m < j; ++m) {
      sum += v[m];
      mx = std::max(mx, v[m]);
    }
    bins.push_back({i, j - 1, sum / static_cast<double>(j - i), mx});
  }
  double top_value = 0;
  for (const Bin& bn : bins) top_value = std::max(top_value, bn.mean);

  put(b, "<p class=\"caption\">{} batches{}: mean {}{}, median {}{}, p95 {}{}, max {}{}{}.</p>\n", n,
      unit.empty() ? "" : fmt::format(", in {}", esc(s.unit)), fmt_value(mean), esc(unit), fmt_value(pct(0.5)),
      esc(unit), fmt_value(pct(0.95)), esc(unit), fmt_value(sorted.back()), esc(unit),
      k > 1 ? fmt::format("; each bar is the mean of {} batches", k) : "");

  const double left = 70, right = 20, top = 22, ph = 170, axis_h = 40;
  const double pw = kW - left - right;
  const double h = top + ph + axis_h;
  Ticks yt = nice_ticks(0, top_value > 0 ? top_value : 1, 5, true);
  const double ymax = yt.values.back() > 0 ? yt.values.back() : 1;
  auto Y = [&](double val) { return top + ph - std::min(val, ymax) / ymax * ph; };
  const double bw = pw / static_cast<double>(bins.size());
  const double gap = bw >= 4 ? 1 : 0;
  const std::string& col = pal.color(s.name);

  svg_open(b, h, s.name + (unit.empty() ? "" : " (" + s.unit + ")") + " per batch");
  for (double t : yt.values) {
    put(b, "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(left), c(Y(t)), c(left + pw), c(Y(t)));
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", c(left - 6), c(Y(t) + 4),
        tick_label(yt, t));
  }
  if (!s.unit.empty())
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", c(left - 6), c(top - 10),
        esc(truncate(s.unit, 10)));
  for (std::size_t i = 0; i < bins.size(); ++i) {
    const Bin& bn = bins[i];
    const double x = left + static_cast<double>(i) * bw;
    const long b0 = s.first_batch + static_cast<long>(bn.first), b1 = s.first_batch + static_cast<long>(bn.last);
    std::string tip = k == 1 ? fmt::format("batch {}: {}{}", b0, fmt_value(bn.mean), unit)
                             : fmt::format("batches {}\u2013{}: mean {}{}, max {}{}", b0, b1, fmt_value(bn.mean), unit,
                                           fmt_value(bn.max), unit);
    put(b, "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
        c(x), c(Y(bn.mean)), c(std::max(0.5, bw - gap)), c(top + ph - Y(bn.mean)), col, esc(tip));
  }
  put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(left), c(top + ph), c(left + pw),
      c(top + ph));
  // Batch-index ticks at bar centres.
  const double first = static_cast<double>(s.first_batch);
  Ticks xt = nice_ticks(first, first + static_cast<double>(n) - 1, 10, false, 1);
  for (double t : xt.values) {
    const double x = left + (t - first + 0.5) / static_cast<double>(n) * pw;
    put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(x), c(top + ph), c(x),
        c(top + ph + 4));
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", c(x), c(top + ph + 16),
        tick_label(xt, t));
  }
  put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">batch</text>\n", c(left + pw / 2),
      c(top + ph + 34));
  put(b, "<line class=\"mean\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>mean {}{}</title></line>\n", c(left),
      c(Y(mean)), c(left + pw), c(Y(mean)), fmt_value(mean), esc(unit));
  put(b, "<text class=\"halo\" x=\"{}\" y=\"{}\" text-anchor=\"end\" style=\"font-size:11px\">mean {}{}</text>\n",
      c(left + pw), c(Y(mean) - 4), fmt_value(mean), esc(unit));
  b += "</svg>\n";
}

void per_batch_section(Buf& b, const RunReport& r) {
  b += "<section id=\"per-batch\">\n<h2>Per batch</h2>\n";
  for (const BatchSeries& s : r.per_batch) batch_chart(b, s);
  b += "</section>\n";
}

void stall_section(Buf& b, const StallShares& in) {
  Palette pal;
  b += "<section id=\"stall-shares\">\n<h2>Stall shares of epoch time</h2>\n";
  std::vector<std::pair<std::string, double>> parts = {{"fetch stall", nonneg(in.fetch_stall)},
                                                       {"prep stall", nonneg(in.prep_stall)},
                                                       {"compute", nonneg(in.compute)}};
  double sum = 0;
  for (auto& p : parts) sum += p.second;
  std::string scaled_note;
  if (sum > 1 + 1e-6) {
    scaled_note = fmt::format(" The shares given summed to {}; they are scaled to 100%.", fmt_pct(sum));
    for (auto& p : parts) p.second /= sum;
  } else if (sum < 1 - 1e-9) {
    parts.emplace_back("other", 1 - sum);
  }
  put(b,
      "<p class=\"caption\">As the DataStall paper reports them: time the GPU waited for data from storage (fetch "
      "stall), "
      "for pre-processing (prep stall), and computed. Data stall (fetch + prep) = <b>{}</b> of epoch time.{}</p>\n",
      fmt_pct(parts[0].second + parts[1].second), scaled_note);
  std::vector<std::pair<std::string, std::string>> items;
  for (auto& [name, share] : parts)
    items.emplace_back(pal.color(name), fmt::format("{} <b>{}</b>", name, fmt_pct(share)));
  legend(b, items);

  const double left = 20, right = 20, top = 6, bar_h = 40, h = 74;
  const double pw = kW - left - right;
  svg_open(b, h, "Stall shares of epoch time (100% bar)");
  double x = left;
  for (auto& [name, share] : parts) {
    const double w = share * pw;
    const std::string& col = pal.color(name);
    put(b,
        "<rect class=\"seg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {} of epoch "
        "time</title></rect>\n",
        c(x), c(top), c(w), c(bar_h), col, name, fmt_pct(share));
    std::string label = fmt::format("{} {}", name, fmt_pct(share));
    if (w < text_width(label, 12) + 10) label = fmt_pct(share, 0);
    if (w >= text_width(label, 12) + 10) {
      put(b, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"fill:{}\" pointer-events=\"none\">{}</text>\n",
          c(x + w / 2), c(top + bar_h / 2 + 4), ink_on(col), label);
    }
    x += w;
  }
  for (int p = 0; p <= 100; p += 25) {
    const double px = left + p / 100.0 * pw;
    put(b, "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", c(px), c(top + bar_h), c(px),
        c(top + bar_h + 4));
    put(b, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}%</text>\n", c(px), c(top + bar_h + 17),
        p == 0     ? "start"
        : p == 100 ? "end"
                   : "middle",
        p);
  }
  b += "</svg>\n</section>\n";
}

void config_section(Buf& b, const std::vector<SummaryRow>& rows) {
  b += "<section id=\"configuration\">\n<h2>Configuration</h2>\n<table class=\"kv config\">\n";
  for (const auto& [k, v] : rows) put(b, "<tr><th>{}</th><td>{}</td></tr>\n", esc(k.empty() ? "(value)" : k), esc(v));
  b += "</table>\n</section>\n";
}

void notes_section(Buf& b, const RunReport& r) {
  b += "<section id=\"notes\">\n<h2>Notes</h2>\n<ul class=\"notes\">\n";
  for (const std::string& n : r.notes) put(b, "<li>{}</li>\n", esc(n));
  b += "</ul>\n</section>\n";
}

}  // namespace

std::string render_html_report(const RunReport& r) {
  Buf b;
  b.reserve(64 * 1024);
  const std::string title = r.title.empty() ? std::string("gpemu run report") : r.title;

  b += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  b += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  b += "<meta name=\"color-scheme\" content=\"light\">\n";
  put(b, "<meta name=\"generator\" content=\"{}\">\n", esc(r.generator));
  put(b, "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(title), kCss);

  b += "<header>\n";
  put(b, "<h1>{}</h1>\n", esc(title));
  b += "<p class=\"meta\">Generated by ";
  b += esc(r.generator.empty() ? std::string("gpemu") : r.generator);
  if (!r.generated_at.empty()) b += " \u00b7 " + esc(r.generated_at);
  b += " \u00b7 self-contained page: no scripts, no network</p>\n<nav>";
  std::vector<std::pair<const char*, const char*>> nav;
  if (!r.summary.empty()) nav.emplace_back("summary", "Summary");
  nav.emplace_back("breakdown", "Time breakdown");
  nav.emplace_back("utilization", "Utilization");
  if (!r.per_batch.empty()) nav.emplace_back("per-batch", "Per batch");
  if (r.stall_shares) nav.emplace_back("stall-shares", "Stall shares");
  if (!r.configuration.empty()) nav.emplace_back("configuration", "Configuration");
  if (!r.notes.empty()) nav.emplace_back("notes", "Notes");
  for (auto& [id, label] : nav) put(b, "<a href=\"#{}\">{}</a>", id, label);
  b += "</nav>\n</header>\n<main>\n";

  if (!r.summary.empty()) summary_section(b, r);
  breakdown_section(b, r);
  utilization_section(b, r);
  if (!r.per_batch.empty()) per_batch_section(b, r);
  if (r.stall_shares) stall_section(b, *r.stall_shares);
  if (!r.configuration.empty()) config_section(b, r.configuration);
  if (!r.notes.empty()) notes_section(b, r);

  b += "</main>\n<footer>Colours: Okabe\u2013Ito colour-blind-safe palette. Hover a chart element for its "
       "numbers.</footer>\n";
  b += "</body>\n</html>\n";
  return b;
}

void write_html_report(const RunReport& report, std::ostream& out) { out << render_html_report(report); }

void write_html_report_file(const RunReport& report, const std::filesystem::path& path) {
  write_file_atomically(path, render_html_report(report), "report");
}

}  // namespace gpemu

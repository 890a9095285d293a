// The run report: one self-contained HTML page with a run's summary and
// charts (time breakdown per GPU, GPU utilization over time, per-batch stall,
// stall shares), its configuration and notes.
//
// The page needs no server and no network: the CSS is inline, the charts are
// inline SVG written here, there is no JavaScript and nothing is fetched (no
// URLs, no external fonts). Open the file in any browser.
//
// The report layer takes plain data: whoever ran the workload fills a
// RunReport (seconds, fractions, strings) and calls
// write_html_report. It depends on no other gpemu layer.
//
//   gpemu::RunReport r;
//   r.title = "ResNet-50 on 4x A100, batch 256";
//   r.summary = {{"epoch time", "412.3 s"}, {"samples/s", "3105"}};
//   r.breakdown = {{"GPU 0", {{"compute", 301.2}, {"H2D", 20.4}, {"data stall", 90.7}}}};
//   r.utilization.push_back(gpemu::utilization_from_intervals("GPU 0", busy, gpemu::kSecond));
//   r.stall_shares = gpemu::StallShares{.fetch_stall = 0.12, .prep_stall = 0.10, .compute = 0.78};
//   gpemu::write_html_report_file(r, "run.html");
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/time.h"

namespace gpemu {

// One row of the summary table ("epoch time" -> "412.3 s").
struct SummaryRow {
  std::string key;
  std::string value;
};

// A named share of a GPU's time ("compute", "H2D", "data stall",
// "communication", "idle", ...), in seconds. Negative or non-finite seconds
// are drawn as zero.
struct TimeComponent {
  std::string name;
  double seconds = 0;
};

// Where one GPU's time went. Components are stacked in the order given; the
// same component name gets the same colour on every GPU.
struct GpuTimeBreakdown {
  std::string gpu;  // label, e.g. "GPU 0"
  std::vector<TimeComponent> components;
};

// One utilization sample: the fraction of [time_s, next sample's time_s)
// during which the GPU was busy, in [0, 1].
struct UtilizationSample {
  double time_s = 0;
  double busy_fraction = 0;
};

// A GPU's utilization over time: a step function. Each sample holds until
// the next sample's time; the last holds until end_s (when end_s is greater
// than its time; otherwise it is drawn as holding for the previous spacing).
struct UtilizationSeries {
  std::string gpu;
  std::vector<UtilizationSample> samples;
  double end_s = 0;
};

// A busy interval [start, end) on one GPU, in emulated ns.
struct BusyInterval {
  Time start = 0;
  Time end = 0;
};

// Turns busy intervals on one GPU into a utilization series with buckets of
// `bucket` ns: buckets are [begin + k*bucket, begin + (k+1)*bucket), the last
// one cut at `end`; each sample's time_s is its bucket's start and its
// busy_fraction the busy ns inside the bucket divided by the bucket's length
// (exact: integer ns, one division). Intervals may be in any order and may
// overlap (overlaps count once); parts outside [begin, end) and empty or
// reversed intervals are ignored. `end` defaults to the latest interval end
// (begin when there is none: an empty series). end_s is set to `end`.
// Throws InputError when bucket <= 0 or end < begin.
UtilizationSeries utilization_from_intervals(std::string gpu, std::span<const BusyInterval> busy, Duration bucket,
                                             Time begin = 0, std::optional<Time> end = std::nullopt);

// A per-batch series, e.g. the data stall of every batch in milliseconds.
// Drawn as a bar chart, batch index on the x axis (from first_batch).
struct BatchSeries {
  std::string name;  // e.g. "data stall per batch"
  std::string unit;  // e.g. "ms"
  std::vector<double> values;
  long first_batch = 0;
};

// Shares of epoch time, as the DataStall paper (Mohan et al., VLDB 2021)
// reports them: time the GPU waited for data to be fetched from storage,
// time it waited for pre-processing, and time it computed. Fractions of 1.
// When they sum to less than 1 the rest is drawn as "other"; when they sum to
// more, they are scaled to 1 and the page says so.
struct StallShares {
  double fetch_stall = 0;
  double prep_stall = 0;
  double compute = 0;
};

struct RunReport {
  std::string title = "gpemu run report";
  // Generation info for the header: what made the page and when. Both are
  // printed as given (the writer reads no clock, so pages are reproducible).
  std::string generator = "gpemu";
  std::string generated_at;  // e.g. "2024-05-01 12:00 UTC"; empty: not shown

  std::vector<SummaryRow> summary;
  std::vector<GpuTimeBreakdown> breakdown;
  std::vector<UtilizationSeries> utilization;
  std::vector<BatchSeries> per_batch;
  std::optional<StallShares> stall_shares;
  // Printed as a table of keys (dotted for nested settings:
  // "model.batch_size") and values. Empty: no configuration section.
  std::vector<SummaryRow> configuration;
  std::vector<std::string> notes;
};

// Writes the page (UTF-8 HTML5). All text from the report is escaped.
void write_html_report(const RunReport& report, std::ostream& out);

// The page as a string.
std::string render_html_report(const RunReport& report);

// Writes the page to a file as a whole (common/atomic_file.h): an error
// (InputError) names the path and the OS reason, and no partial page stays.
void write_html_report_file(const RunReport& report, const std::filesystem::path& path);

// HTML-escapes text for element content and quoted attribute values
// (& < > " '); control characters other than tab, newline and carriage
// return are dropped.
std::string html_escape(std::string_view text);

}  // namespace gpemu

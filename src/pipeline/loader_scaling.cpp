#include "gpemu/pipeline/loader_scaling.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "common/text_fields.h"
#include "gpemu/error.h"

namespace gpemu::pipeline {
namespace {

constexpr int kMaxWorkers = 65536;
constexpr std::size_t kMaxFileBytes = 1 << 20;  // a few hundred rows at most in practice

// A field as messages quote it: at most 40 characters, bytes outside printable ASCII as '?'.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}

bool number(std::string_view s, double& v) {
  const std::optional<double> parsed = text::parse_number(s);
  if (parsed) v = *parsed;
  return parsed.has_value();
}

}  // namespace

double LoaderScaling::efficiency(double busy) const {
  if (points.empty() || busy <= 1.0) return 1.0;
  const double base = points.front().second;  // one worker's images/s
  auto eff = [&](const std::pair<int, double>& p) { return p.second / (base * p.first); };
  if (busy >= points.back().first) return eff(points.back());
  const auto hi = std::upper_bound(points.begin(), points.end(), busy,
                                   [](double b, const std::pair<int, double>& p) { return b < p.first; });
  const auto lo = hi - 1;
  const double f = (busy - lo->first) / static_cast<double>(hi->first - lo->first);
  return eff(*lo) + f * (eff(*hi) - eff(*lo));
}

LoaderScaling parse_loader_scaling(std::string_view csv, std::string_view name) {
  const std::string accepted =
      "accepted: a CSV whose header names the columns workers and images_per_s, one row per worker count (whole "
      "numbers 1 to 65536, each once, a row of 1 among them), positive images per second";
  LoaderScaling s;
  s.source = std::string(name);
  std::size_t line_no = 0, workers_col = 0, rate_col = 0;
  bool header = false;
  for (const std::string_view raw : text::split_lines(csv)) {
    const std::string_view line = text::trim(raw);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto f = text::split_csv(line);
    if (!header) {
      const auto find = [&](std::string_view col) {
        return static_cast<std::size_t>(std::find(f.begin(), f.end(), col) - f.begin());
      };
      workers_col = find("workers");
      rate_col = find("images_per_s");
      if (workers_col == f.size() || rate_col == f.size())
        throw InputError(fmt::format("loader scaling {}:{}: the header has no {} column; {}", name, line_no,
                                     workers_col == f.size() ? "workers" : "images_per_s", accepted));
      header = true;
      continue;
    }
    double w = 0, r = 0;
    if (f.size() <= std::max(workers_col, rate_col) || !number(f[workers_col], w) || !number(f[rate_col], r))
      throw InputError(
          fmt::format("loader scaling {}:{}: a row needs a number in the workers and images_per_s columns; {}", name,
                      line_no, accepted));
    if (w == 0) continue;  // the in-process loader (torch's num_workers=0)
    if (w < 1 || w > kMaxWorkers || w != std::floor(w))
      throw InputError(
          fmt::format("loader scaling {}:{}: {} workers; {}", name, line_no, shown(f[workers_col]), accepted));
    if (r <= 0)
      throw InputError(
          fmt::format("loader scaling {}:{}: {} images per second; {}", name, line_no, shown(f[rate_col]), accepted));
    const int wi = static_cast<int>(w);
    if (std::any_of(s.points.begin(), s.points.end(), [wi](const auto& p) { return p.first == wi; }))
      throw InputError(
          fmt::format("loader scaling {}:{}: a second row of {} workers; {}", name, line_no, wi, accepted));
    s.points.emplace_back(wi, r);
  }
  if (!header) throw InputError(fmt::format("loader scaling {}: no header line; {}", name, accepted));
  std::sort(s.points.begin(), s.points.end());
  if (s.points.empty() || s.points.front().first != 1)
    throw InputError(
        fmt::format("loader scaling {}: no row of 1 worker (the efficiencies are relative to it); {}", name, accepted));
  return s;
}

LoaderScaling read_loader_scaling(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("loader scaling {}: cannot be read; give a CSV file", file.string()));
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw InputError(fmt::format("loader scaling {}: cannot be read; give a CSV file", file.string()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes)
    throw InputError(fmt::format("loader scaling {}: more than {} bytes; accepted: a CSV of one row per worker count",
                                 file.string(), kMaxFileBytes));
  return parse_loader_scaling(text, file.string());
}

}  // namespace gpemu::pipeline

#include "bench_util.h"

#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

namespace gpemu::bench {

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  if (samples.empty()) return s;
  s.p50 = percentile(samples, 50);
  s.p99 = percentile(samples, 99);
  s.max = *std::max_element(samples.begin(), samples.end());
  s.mean = common::mean(samples);
  return s;
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}f}", v, decimals);
}

std::string significant(double v, int digits) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}g}", v, digits);
}

std::string grouped(double v) {
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool CommandOutput::succeeded() const { return started && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

CommandOutput run_command(const std::string& command) {
  CommandOutput r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  r.started = true;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  r.status = ::pclose(pipe);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '{') r.last_json_line = line;
  return r;
}

}  // namespace gpemu::bench

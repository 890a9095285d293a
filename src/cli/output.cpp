#include "cli/output.h"
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include "gpemu/error.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace gpemu::cli {

void print_summary(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& rows) {
  std::size_t w = 0;
  for (const auto& [k, v] : rows) w = std::max(w, k.size());
  for (const auto& [k, v] : rows) out << fmt::format("{:<{}}  {}\n", k, w, v);
}

ProgressBar::ProgressBar(std::string label, std::int64_t total)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)), enabled_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { finish(); }

std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, double elapsed_s) {
  total = std::max<std::int64_t>(total, 1);
  done = std::clamp<std::int64_t>(done, 0, total);
  const int permille = static_cast<int>(1000 * done / total);
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::string line = fmt::format("{} [{}{}] {:5.1f}% ({}/{})", label, std::string(filled, '#'),
                                 std::string(kWidth - filled, '.'), permille / 10.0, done, total);
  if (done > 0 && done < total && elapsed_s > 0) {
    const double left = elapsed_s * static_cast<double>(total - done) / static_cast<double>(done);
    line += left < 120      ? fmt::format(" ~{:.0f} s left", left)
            : left < 7200   ? fmt::format(" ~{:.1f} min left", left / 60)
            : left < 172800 ? fmt::format(" ~{:.1f} h left", left / 3600)
            : left < 6.3e7  ? fmt::format(" ~{:.1f} days left", left / 86400)
                            : fmt::format(" ~{:.3g} years left", left / 3.156e7);
  }
  return line;
}

void ProgressBar::update(std::int64_t done) {
  if (!enabled_ || finished_) return;
  const int permille = static_cast<int>(1000 * std::min(done, total_) / total_);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r%s\033[K", progress_text(label_, done, total_, elapsed).c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (last_permille_ >= 0) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
std::string fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

void print_warnings(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) std::cerr << "gpemu: warning: " << line << '\n';
}

}  // namespace gpemu::cli

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

void ProgressBar::update(std::int64_t done) {
  if (!enabled_ || finished_) return;
  const int permille = static_cast<int>(1000 * std::min(done, total_) / total_);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::fprintf(stderr, "\r%s [%s%s] %5.1f%% (%lld/%lld)", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), permille / 10.0, static_cast<long long>(done),
               static_cast<long long>(total_));
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

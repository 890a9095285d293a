#include "cli/output.h"
#include "gpemu/error.h"
#include <fstream>
#include <filesystem>
#include <cstring>
#include <cerrno>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>

namespace gpemu::cli {
namespace {
bool numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) ||
                        (s.size() > 1 && (s[0] == '-' || s[0] == '+') && std::isdigit(static_cast<unsigned char>(s[1]))));
}
}  // namespace

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& r : rows_)
    for (std::size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& r, bool head) {
    std::string s;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string& v = c < r.size() ? r[c] : std::string();
      const bool right = !head && numeric(v);
      s += right ? fmt::format("{:>{}}", v, width[c]) : fmt::format("{:<{}}", v, width[c]);
      if (c + 1 < width.size()) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(header_, true);
  std::string rule;
  for (std::size_t c = 0; c < width.size(); ++c) rule += std::string(width[c], '-') + (c + 1 < width.size() ? "  " : "");
  out << rule << '\n';
  for (const auto& r : rows_) line(r, false);
}

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

}  // namespace gpemu::cli

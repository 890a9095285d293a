// The drawing kit of gpemu's HTML pages (html_report.cpp): text appended to
// one buffer, numbers formatted for people and for SVG coordinates, axis
// ticks, label widths, a colour-blind-safe palette that gives names with a
// meaning (compute, stall, copy...) their colour, legends and the SVG frame.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace gpemu::chart {

using Buf = std::string;

template <class... Args>
void put(Buf& b, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(b), f, std::forward<Args>(args)...);
}

std::string esc(std::string_view s);

// ---------------------------------------------------------------- numbers

double finite_or_zero(double v);
double nonneg(double v);
double clamp01(double v);

// Drops trailing zeros of a fixed-point number ("12.50" -> "12.5", "3.00" -> "3").
std::string trim_zeros(std::string s);

// About three significant digits, no exponent in the usual range.
std::string fmt_value(double v);

std::string fmt_seconds(double s);

std::string fmt_pct(double fraction, int decimals = 1);

// SVG coordinate.
std::string c(double v);

struct Ticks {
  std::vector<double> values;
  double step = 1;
  int decimals = 0;
};

double nice_step(double range, int target);

// Ticks at multiples of a 1/2/5 step covering [lo, hi]; when `extend` the
// last tick is at or above hi (a nice axis maximum), else ticks stay inside.
Ticks nice_ticks(double lo, double hi, int target, bool extend, double min_step = 0);

std::string tick_label(const Ticks& t, double v);

// ---------------------------------------------------------------- text

// Cuts UTF-8 text to at most `max` code points, adding an ellipsis.
std::string truncate(std::string_view s, std::size_t max);

// Rough width of SVG text in px, to decide whether a label fits.
double text_width(std::string_view s, double font_px);

std::string lower(std::string_view s);

// ---------------------------------------------------------------- colours

// Okabe & Ito's colour-blind-safe palette, with meanings, then Paul Tol's
// muted colours for anything else.
constexpr const char* kBlue = "#0072B2";
constexpr const char* kSky = "#56B4E9";
constexpr const char* kVermillion = "#D55E00";
constexpr const char* kOrange = "#E69F00";
constexpr const char* kGreen = "#009E73";
constexpr const char* kPurple = "#CC79A7";
constexpr const char* kGrey = "#BBBBBB";
constexpr const char* kDarkGrey = "#888888";

const char* semantic_color(std::string_view name);

class Palette {
 public:
  Palette() = default;
  // Gives every name with a meaning its colour first, so that a name without
  // one cannot take it.
  explicit Palette(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      const char* s = semantic_color(n);
      if (s && !taken(s) && !known(n)) assigned_.emplace_back(n, s);
    }
    for (const std::string& n : names) color(n);
  }

  const std::string& color(std::string_view name) {
    for (auto& [n, col] : assigned_)
      if (n == name) return col;
    std::string pick;
    if (const char* s = semantic_color(name); s && !taken(s)) pick = s;
    if (pick.empty()) {
      static constexpr const char* kFallback[] = {kPurple,   "#F0E442", "#882255",   "#332288", "#DDCC77",
                                                  "#44AA99", "#117733", "#AA4499",   kBlue,     kSky,
                                                  kGreen,    kOrange,   kVermillion, kDarkGrey, kGrey};
      for (const char* f : kFallback)
        if (!taken(f)) {
          pick = f;
          break;
        }
      if (pick.empty()) pick = kFallback[assigned_.size() % std::size(kFallback)];
    }
    assigned_.emplace_back(std::string(name), pick);
    return assigned_.back().second;
  }

 private:
  bool known(std::string_view name) const {
    for (auto& a : assigned_)
      if (a.first == name) return true;
    return false;
  }
  bool taken(std::string_view col) const {
    for (auto& a : assigned_)
      if (a.second == col) return true;
    return false;
  }
  std::vector<std::pair<std::string, std::string>> assigned_;
};

// Dark or light text on a fill colour "#RRGGBB".
const char* ink_on(std::string_view fill);

void legend(Buf& b, const std::vector<std::pair<std::string, std::string>>& items /* colour, text */);

constexpr double kW = 960;  // SVG width (viewBox units = px at full size)

void svg_open(Buf& b, double h, std::string_view title);

}  // namespace gpemu::chart

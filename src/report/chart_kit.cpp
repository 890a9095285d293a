// The drawing kit of gpemu's HTML pages (chart_kit.h).
#include "report/chart_kit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "gpemu/report.h"

namespace gpemu::chart {

std::string esc(std::string_view s) { return html_escape(s); }

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }
double nonneg(double v) { return std::max(0.0, finite_or_zero(v)); }
double clamp01(double v) { return std::clamp(finite_or_zero(v), 0.0, 1.0); }

std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string fmt_value(double v) {
  v = finite_or_zero(v);
  double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e7 || a < 1e-3) return fmt::format("{:.3g}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return trim_zeros(fmt::format("{:.1f}", v));
  return trim_zeros(fmt::format("{:.2f}", v));
}

std::string fmt_seconds(double s) {
  s = finite_or_zero(s);
  double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a >= 1) return fmt_value(s) + " s";
  if (a >= 1e-3) return fmt_value(s * 1e3) + " ms";
  if (a >= 1e-6) return fmt_value(s * 1e6) + " \u00b5s";
  return fmt_value(s * 1e9) + " ns";
}

std::string fmt_pct(double fraction, int decimals) {
  return fmt::format("{:.{}f}%", finite_or_zero(fraction) * 100.0, decimals);
}

std::string c(double v) { return trim_zeros(fmt::format("{:.2f}", finite_or_zero(v))); }

double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  double raw = range / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double m = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return m * mag;
}

Ticks nice_ticks(double lo, double hi, int target, bool extend, double min_step) {
  Ticks t;
  if (!(hi > lo)) hi = lo + 1;
  t.step = std::max(nice_step(hi - lo, target), min_step);
  t.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(t.step) + 1e-9)));
  double first = std::ceil(lo / t.step - 1e-9);
  double last = extend ? std::ceil(hi / t.step - 1e-9) : std::floor(hi / t.step + 1e-9);
  for (double k = first; k <= last && t.values.size() < 100; k += 1) t.values.push_back(k * t.step);
  if (t.values.empty()) t.values.push_back(lo);
  return t;
}

std::string tick_label(const Ticks& t, double v) {
  return fmt::format("{:.{}f}", std::fabs(v) < t.step * 1e-6 ? 0.0 : v, t.decimals);
}

std::string truncate(std::string_view s, std::size_t max) {
  std::size_t cps = 0, cut = std::string_view::npos;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (cps == max - 1) cut = i;
    if (++cps > max) return std::string(s.substr(0, cut)) + "\u2026";
  }
  return std::string(s);
}

double text_width(std::string_view s, double font_px) {
  std::size_t cps = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++cps;
  return static_cast<double>(cps) * font_px * 0.6;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& ch : r) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

const char* semantic_color(std::string_view name) {
  std::string n = lower(name);
  auto has = [&](const char* w) { return n.find(w) != std::string::npos; };
  if (has("idle")) return kGrey;
  if (has("other")) return kDarkGrey;
  if (has("fetch") || has("storage") || has("read")) return kVermillion;
  if (has("prep") || has("decode") || has("augment") || has("cpu")) return kOrange;
  if (has("comm") || has("reduce") || has("nccl") || has("nvlink") || has("gather") || has("sync")) return kGreen;
  if (has("h2d") || has("d2h") || has("copy") || has("transfer") || has("pcie") || has("memcpy")) return kSky;
  if (has("stall") || has("wait") || has("data")) return kVermillion;
  if (has("optim") || has("update")) return kPurple;
  if (has("compute") || has("kernel") || has("forward") || has("backward") || has("gpu")) return kBlue;
  return nullptr;
}

const char* ink_on(std::string_view fill) {
  if (fill.size() != 7) return "#111111";
  auto hex = [&](int i) { return std::stoi(std::string(fill.substr(i, 2)), nullptr, 16); };
  double lum = (0.299 * hex(1) + 0.587 * hex(3) + 0.114 * hex(5)) / 255.0;
  return lum > 0.55 ? "#111111" : "#ffffff";
}

void legend(Buf& b, const std::vector<std::pair<std::string, std::string>>& items /* colour, text */) {
  b += "<ul class=\"legend\">\n";
  for (auto& [col, text] : items) {
    put(b, "<li><span class=\"swatch\" style=\"background:{}\"></span><span>{}</span></li>\n", col, text);
  }
  b += "</ul>\n";
}

void svg_open(Buf& b, double h, std::string_view title) {
  put(b, "<svg class=\"chart\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\">\n<title>{}</title>\n",
      c(kW), c(h), c(kW), c(h), esc(title));
}

}  // namespace gpemu::chart

// A validation report's outputs (validate_models' report, calibration.h):
// its JSON form, the text table `gpemu validate` prints and the SVG chart.
#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cost/op_validation.h"
#include "cost/validation_json.h"
#include "gpemu/calibration.h"

namespace gpemu {

nlohmann::json error_stats_json(const ErrorStats& s) {
  return {{"n", s.n},
          {"median_ape_pct", s.median_ape_pct},
          {"mean_ape_pct", s.mean_ape_pct},
          {"p90_ape_pct", s.p90_ape_pct},
          {"max_ape_pct", s.max_ape_pct},
          {"median_bias_pct", s.median_bias_pct}};
}

namespace {

nlohmann::json phases_json(const std::map<ValidationPhase, ErrorStats>& m) {
  nlohmann::json o = nlohmann::json::object();
  for (ValidationPhase ph : kValidationPhases) {
    auto it = m.find(ph);
    o[std::string(to_string(ph))] = error_stats_json(it == m.end() ? ErrorStats{} : it->second);
  }
  return o;
}

std::string pct(double v) { return fmt::format("{:.1f}", v); }

struct OomTally {
  int pairs = 0, exact = 0, within_2_batches = 0, within_2pct = 0;
  long checked = 0, agreeing = 0;
  double pct(int n) const { return pairs ? 100.0 * n / pairs : 0.0; }
};
std::map<std::string, OomTally> oom_per_gpu(const std::vector<OomCheck>& oom) {
  std::map<std::string, OomTally> m;
  for (const OomCheck& o : oom) {
    OomTally& t = m[o.gpu];
    ++t.pairs;
    t.exact += o.exact;
    t.within_2_batches += o.within_2_batches;
    t.within_2pct += o.within_2pct;
    t.checked += o.batches_checked;
    t.agreeing += o.batches_agreeing;
  }
  return m;
}

}  // namespace

nlohmann::json validation_json(const ValidationReport& r) {
  nlohmann::json j;
  j["calibration"] = r.calibration_source;
  j["overall"] = phases_json(r.overall);
  nlohmann::json g = nlohmann::json::object(), m = nlohmann::json::object();
  for (const auto& [k, v] : r.per_gpu) g[k] = phases_json(v);
  for (const auto& [k, v] : r.per_model) m[k] = phases_json(v);
  j["per_gpu"] = g;
  j["per_model"] = m;
  j["oom_agreement_pct"] = r.oom_agreement_pct;
  j["oom_exact_pct"] = r.oom_exact_pct;
  j["oom_within_2_batches"] = r.oom_within_2_batches_pct;
  j["oom_within_2pct"] = r.oom_within_2pct_pct;
  j["oom_median_error_pct"] = r.oom_median_error_pct;
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [gpu, s] : oom_per_gpu(r.oom))
    per[gpu] = {{"pairs", s.pairs},
                {"exact_pct", s.pct(s.exact)},
                {"within_2_batches", s.pct(s.within_2_batches)},
                {"within_2pct", s.pct(s.within_2pct)},
                {"agreement_pct", s.checked ? 100.0 * s.agreeing / s.checked : 0.0}};
  j["oom_per_gpu"] = per;
  if (r.oom_fit.computed) {
    const OomMarginFit& f = r.oom_fit;
    nlohmann::json folds = nlohmann::json::array();
    for (const auto& fo : f.held_out)
      folds.push_back({{"gpu", fo.gpu}, {"margin", fo.margin}, {"pairs", fo.pairs}, {"exact", fo.exact}});
    j["oom_margin_fit"] = {{"pairs", f.pairs},
                           {"used_margin", f.used_margin},
                           {"exact_at_used", f.exact_at_used},
                           {"best_margin", f.best_margin},
                           {"best_range", {f.best_lo, f.best_hi}},
                           {"exact_at_best", f.exact_at_best},
                           {"held_out", folds},
                           {"exact_held_out", f.exact_held_out}};
  }
  nlohmann::json oom = nlohmann::json::array();
  for (const OomCheck& o : r.oom) {
    nlohmann::json e = {{"gpu", o.gpu},
                        {"model", o.model},
                        {"measured_last_batch", o.measured_last_batch},
                        {"predicted_max_batch", o.predicted_max_batch},
                        {"batches_checked", o.batches_checked},
                        {"batches_agreeing", o.batches_agreeing},
                        {"exact", o.exact},
                        {"within_2_batches", o.within_2_batches},
                        {"within_2pct", o.within_2pct}};
    e["measured_oom_batch"] = o.measured_oom_batch ? nlohmann::json(*o.measured_oom_batch) : nlohmann::json(nullptr);
    oom.push_back(e);
  }
  j["oom"] = oom;
  nlohmann::json worst = nlohmann::json::object();
  for (const auto& [ph, v] : r.worst) {
    nlohmann::json a = nlohmann::json::array();
    for (const ValidationPoint& p : v)
      a.push_back({{"gpu", p.gpu},
                   {"model", p.model},
                   {"batch_size", p.batch_size},
                   {"measured", p.measured},
                   {"predicted", p.predicted},
                   {"ape_pct", p.ape_pct()}});
    worst[std::string(to_string(ph))] = a;
  }
  j["worst"] = worst;
  j["skipped"] = r.skipped;
  j["op_classes"] = cost_detail::op_classes_json(r.op_classes);
  return j;
}

void print_validation(const ValidationReport& r, std::ostream& out) {
  auto table = [&](const std::string& title, const std::map<std::string, std::map<ValidationPhase, ErrorStats>>& m) {
    out << title << " (median / p90 APE %, n)\n";
    std::size_t w = 4;
    for (const auto& [k, v] : m) w = std::max(w, k.size());
    out << fmt::format("{:<{}}", "", w);
    for (ValidationPhase ph : kValidationPhases) out << fmt::format("  {:>19}", to_string(ph));
    out << '\n';
    for (const auto& [k, v] : m) {
      out << fmt::format("{:<{}}", k, w);
      for (ValidationPhase ph : kValidationPhases) {
        auto it = v.find(ph);
        if (it == v.end() || it->second.n == 0) {
          out << fmt::format("  {:>19}", "-");
          continue;
        }
        out << fmt::format("  {:>19}", fmt::format("{} / {} ({})", pct(it->second.median_ape_pct),
                                                   pct(it->second.p90_ape_pct), it->second.n));
      }
      out << '\n';
    }
    out << '\n';
  };
  std::map<std::string, std::map<ValidationPhase, ErrorStats>> overall{{"all", r.overall}};
  out << "calibration: " << r.calibration_source << "\n\n";
  table("overall", overall);
  table("per GPU", r.per_gpu);
  table("per model", r.per_model);
  out << "overall mean APE %:";
  for (ValidationPhase ph : kValidationPhases)
    if (auto it = r.overall.find(ph); it != r.overall.end())
      out << fmt::format(" {} {}", to_string(ph), pct(it->second.mean_ape_pct));
  out << "\n\nworst cases\n";
  for (const auto& [ph, v] : r.worst)
    for (const ValidationPoint& p : v)
      out << fmt::format("  {:<11} {:<16} {:<20} b{:<4} measured {:.4g} predicted {:.4g} ({:+.0f}%)\n", to_string(ph),
                         p.gpu, p.model, p.batch_size, p.measured, p.predicted, (p.predicted / p.measured - 1) * 100);
  out << fmt::format(
      "\nOOM decisions: {:.1f}% of batch sizes agree; predicted boundary exact for {:.1f}% of {} "
      "GPU/model pairs, within 2 batches for {:.1f}%, within 2% for {:.1f}%; median error of the "
      "largest batch {:+.1f}%\n",
      r.oom_agreement_pct, r.oom_exact_pct, r.oom.size(), r.oom_within_2_batches_pct, r.oom_within_2pct_pct,
      r.oom_median_error_pct);
  for (const auto& [gpu, t] : oom_per_gpu(r.oom))
    out << fmt::format("  {:<22} {:>3} pairs: exact {:5.1f}%, within 2 batches {:5.1f}%, within 2% {:5.1f}%\n", gpu,
                       t.pairs, t.pct(t.exact), t.pct(t.within_2_batches), t.pct(t.within_2pct));
  if (r.oom_fit.computed) {
    const OomMarginFit& f = r.oom_fit;
    out << fmt::format(
        "  workspace/fragmentation margin {:.2f}%: boundary exact for {}/{} pairs; refitted here: "
        "best {:.2f}% (range {:.2f}-{:.2f}%), {}/{} in-sample",
        100 * f.used_margin, f.exact_at_used, f.pairs, 100 * f.best_margin, 100 * f.best_lo, 100 * f.best_hi,
        f.exact_at_best, f.pairs);
    if (!f.held_out.empty()) {
      out << fmt::format("; one GPU left out: {}/{} held-out (", f.exact_held_out, f.pairs);
      for (std::size_t i = 0; i < f.held_out.size(); ++i)
        out << fmt::format("{}{} {:.2f}% {}/{}", i ? ", " : "", f.held_out[i].gpu, 100 * f.held_out[i].margin,
                           f.held_out[i].exact, f.held_out[i].pairs);
      out << ')';
    }
    out << '\n';
  }
  int shown = 0;
  for (const OomCheck& o : r.oom) {
    if (o.exact || shown >= 12) continue;
    ++shown;
    out << fmt::format("  {:<16} {:<20} measured {} predicted max batch {}\n", o.gpu, o.model,
                       o.measured_oom_batch ? fmt::format("OOM at {}", *o.measured_oom_batch)
                                            : fmt::format("fits up to {}", o.measured_last_batch),
                       o.predicted_max_batch);
  }
  cost_detail::print_op_classes(r.op_classes, out);
  for (const std::string& s : r.skipped) out << "skipped: " << s << '\n';
}

std::string validation_svg(const ValidationReport& r) {
  std::map<std::string, std::vector<const ValidationPoint*>> by_gpu;
  for (const ValidationPoint& p : r.points)
    if (p.phase == ValidationPhase::Iteration && p.measured > 0 && p.predicted > 0) by_gpu[p.gpu].push_back(&p);
  const int panels = std::max<int>(1, static_cast<int>(by_gpu.size()));
  const int cols = std::min(panels, 2), rows = (panels + cols - 1) / cols;
  const double pw = 420, ph = 400, margin = 60;
  const double width = cols * pw, height = rows * ph + 30;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">gpemu validate: predicted vs measured "
      "iteration time (forward + backward), log-log</text>\n",
      width, height, width / 2);
  int idx = 0;
  for (const auto& [gpu, pts] : by_gpu) {
    const double ox = (idx % cols) * pw, oy = 30 + (idx / cols) * ph;
    ++idx;
    double lo = 1e300, hi = 0;
    for (const ValidationPoint* p : pts) {
      lo = std::min({lo, p->measured, p->predicted});
      hi = std::max({hi, p->measured, p->predicted});
    }
    const double l0 = std::floor(std::log10(lo)), l1 = std::ceil(std::log10(hi));
    const double span = std::max(l1 - l0, 1.0);
    const double size = std::min(pw - margin - 20, ph - margin - 30), x0 = ox + margin, y0 = oy + 24 + size;
    auto X = [&](double v) { return x0 + (std::log10(v) - l0) / span * size; };
    auto Y = [&](double v) { return y0 - (std::log10(v) - l0) / span * size; };
    double med = 0;
    if (auto it = r.per_gpu.find(gpu); it != r.per_gpu.end())
      if (auto jt = it->second.find(ValidationPhase::Iteration); jt != it->second.end())
        med = jt->second.median_ape_pct;
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{} (median APE {:.1f}%, n={})</text>\n",
        x0 + size / 2, oy + 14, gpu, med, pts.size());
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", x0,
                     y0 - size, size, size);
    for (double d = l0; d <= l0 + span + 1e-9; d += 1) {
      const double v = std::pow(10.0, d);
      s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", X(v), y0, y0 - size);
      s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>\n", x0, Y(v), x0 + size);
      const std::string label = v >= 1 ? fmt::format("{:g} s", v) : fmt::format("{:g} ms", v * 1e3);
      s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", X(v), y0 + 14, label);
      s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", x0 - 4, Y(v) + 4, label);
    }
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n",
                     X(std::pow(10.0, l0)), Y(std::pow(10.0, l0)), X(std::pow(10.0, l0 + span)),
                     Y(std::pow(10.0, l0 + span)));
    for (const ValidationPoint* p : pts)
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"1.6\" fill=\"#1f77b4\" fill-opacity=\"0.5\"/>\n",
                       X(p->measured), Y(p->predicted));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured</text>\n", x0 + size / 2, y0 + 32);
    s += fmt::format(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">predicted</text>\n",
        x0 - 44, y0 - size / 2);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace gpemu

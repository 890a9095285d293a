// Comparing the analytical model with published step times
// (include/gpemu/step_times.h): predictions per row, error tables.
#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "cost/step_times.h"
#include "cost/text_fields.h"
#include "cost/validation_json.h"
#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {
namespace {

// The closest program the model can run: the parts unsupported_part() names
// replaced by what the zoo has (fused attention by eager attention).
AnalyticalOptions nearest_options(AnalyticalOptions o) {
  ProgramVariant v = o.variant;
  v.attention = AttentionKernel::Eager;
  v.micro_steps = std::max(v.micro_steps, 1);
  return to_analytical_options(v, o);
}

// Per group (group_of), its rows with a stated error and how many fall within
// the error that the rows outside the group alone would state for them: the
// program evidence rebuilt without the group, the profiles' figure kept.
std::map<std::string, StepTimeReport::Coverage> coverage_leaving_out(
    const std::vector<StepTimePoint>& points, const std::function<std::string(const StepTimePoint&)>& group_of) {
  std::vector<std::string> groups;
  for (const StepTimePoint& p : points) groups.push_back(group_of(p));
  std::map<std::string, Calibration> without;  // per group: program evidence from the other groups' rows
  for (const std::string& group : groups) {
    if (without.count(group)) continue;
    std::map<std::string, std::vector<double>> ape;
    for (std::size_t i = 0; i < points.size(); ++i)
      if (groups[i] != group) ape[points[i].kind].push_back(points[i].ape_pct());
    Calibration& c = without[group];
    for (const auto& [k, v] : ape)
      c.program_errors[k] = ProgramEvidence{static_cast<int>(v.size()), covering_quantile(v, kEvidenceQuantile), 0};
  }
  std::map<std::string, StepTimeReport::Coverage> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const StepTimePoint& p = points[i];
    if (!p.expected) continue;
    const std::string& group = groups[i];
    double stated = p.expected_profiles ? p.expected_profiles->pct.iteration : 0;
    if (auto e = without.at(group).expected_error(find_gpu(p.program.gpu_id), p.program.zoo_model, p.family,
                                                  p.precision_kind))
      stated = std::max(stated, e->pct.iteration);
    StepTimeReport::Coverage& c = out[group];
    ++c.rows;
    if (p.ape_pct() <= stated) ++c.covered;
  }
  return out;
}

ErrorStats stats_of(const std::vector<const StepTimePoint*>& pts) {
  std::vector<double> ape, sgn;
  for (const StepTimePoint* p : pts) {
    ape.push_back(p->ape_pct());
    sgn.push_back(p->signed_pct());
  }
  return error_stats(ape, sgn);
}

}  // namespace

double StepTimePoint::ape_pct() const { return std::abs(predicted_ms - measured_ms) / measured_ms * 100; }

bool StepTimePoint::covered() const { return expected && ape_pct() <= expected->pct.iteration; }

double predict_row_ms(const RowProgram& program, int batch_size, const Calibration& calibration) {
  const GpuSpec& gpu = find_gpu(program.gpu_id);
  AnalyticalOptions o = program.fit == RowFit::Unsupported ? nearest_options(program.options) : program.options;
  if (!program.host.empty()) o.host = calibration.host(program.host);
  const OpProgram prog = OpProgram::compile(zoo::load_model(program.zoo_model), o);
  const PhaseSeconds s = predict_seconds(prog, batch_size, gpu_peaks(gpu, o), calibration.factors(gpu),
                                         calibration.correction(program.zoo_model));
  return (s.forward + s.backward) * 1e3;
}

StepTimeReport validate_step_times(const std::vector<StepTimeRow>& rows, std::shared_ptr<const Calibration> calibration,
                                   const StepTimeOptions& options) {
  if (!calibration) throw Error("validate_step_times needs a calibration");
  StepTimeReport r;
  r.calibration_source = calibration->source.empty() ? "built-in default factors" : calibration->source;
  for (const StepTimeRow& row : rows) {
    RowProgram prog = row_program(row);
    const bool compare = prog.fit != RowFit::Unsupported || (options.nearest && prog.nearest_available);
    if (!compare) {
      r.not_compared.emplace_back(row, std::move(prog));
      continue;
    }
    StepTimePoint p;
    p.row = row;
    p.measured_ms = row.published_iteration_ms;
    p.predicted_ms = predict_row_ms(prog, row.batch_size, *calibration);
    const zoo::ModelGraph& g = zoo::load_model(prog.zoo_model);
    p.family = g.family();
    const GpuSpec& gpu = find_gpu(prog.gpu_id);
    p.precision_kind = evidence_precision(prog.options, gpu, g.family());
    p.kind = evidence_kind(g.family(), p.precision_kind);
    p.expected = calibration->expected_error(gpu, prog.zoo_model, g.family(), p.precision_kind);
    p.expected_profiles = calibration->expected_error(gpu, prog.zoo_model, g.family());
    p.program = std::move(prog);
    r.points.push_back(std::move(p));
  }
  std::vector<const StepTimePoint*> all;
  std::map<std::string, std::vector<const StepTimePoint*>> gpu, fam, prec, group, src, fit;
  for (const StepTimePoint& p : r.points) {
    all.push_back(&p);
    gpu[p.row.gpu].push_back(&p);
    fam[p.family].push_back(&p);
    prec[p.row.precision].push_back(&p);
    group[p.family + " x " + p.row.precision].push_back(&p);
    src[p.row.source_repo()].push_back(&p);
    fit[std::string(to_string(p.program.fit))].push_back(&p);
    if (p.expected) {
      ++r.with_expected;
      if (p.covered()) ++r.covered;
    }
    const double ratio = p.predicted_ms / p.measured_ms;
    if (ratio > 2 || ratio < 0.5) ++r.beyond_2x;
  }
  for (const auto& [row, c] :
       coverage_leaving_out(r.points, [](const StepTimePoint& p) { return std::to_string(p.row.line); }))
    r.covered_leave_one_out += c.covered;
  r.gpu_left_out = coverage_leaving_out(r.points, [](const StepTimePoint& p) { return p.row.gpu; });
  r.source_left_out = coverage_leaving_out(r.points, [](const StepTimePoint& p) { return p.row.source_repo(); });
  r.overall = stats_of(all);
  auto fill = [](const auto& from, std::map<std::string, ErrorStats>& to) {
    for (const auto& [k, v] : from) to[k] = stats_of(v);
  };
  fill(gpu, r.per_gpu);
  fill(fam, r.per_family);
  fill(prec, r.per_precision);
  fill(group, r.per_group);
  fill(src, r.per_source);
  fill(fit, r.per_fit);
  return r;
}

std::map<std::string, ProgramEvidence> program_evidence(const StepTimeReport& r) {
  std::map<std::string, std::vector<double>> ape;
  for (const StepTimePoint& p : r.points) ape[p.kind].push_back(p.ape_pct());
  std::map<std::string, ProgramEvidence> out;
  for (const auto& [k, v] : ape)
    out[k] = ProgramEvidence{static_cast<int>(v.size()), covering_quantile(v, kEvidenceQuantile),
                             error_stats(v).median_ape_pct};
  return out;
}

namespace {

nlohmann::json map_json(const std::map<std::string, ErrorStats>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = error_stats_json(v);
  return j;
}

}  // namespace

nlohmann::json step_time_json(const StepTimeReport& r) {
  nlohmann::json j;
  j["calibration"] = r.calibration_source;
  j["overall"] = error_stats_json(r.overall);
  j["per_gpu"] = map_json(r.per_gpu);
  j["per_family"] = map_json(r.per_family);
  j["per_precision"] = map_json(r.per_precision);
  j["per_family_precision"] = map_json(r.per_group);
  j["per_source"] = map_json(r.per_source);
  j["per_fit"] = map_json(r.per_fit);
  j["beyond_2x"] = r.beyond_2x;
  auto coverage_json = [](const std::map<std::string, StepTimeReport::Coverage>& m) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, c] : m) o[k] = {{"rows", c.rows}, {"within", c.covered}};
    return o;
  };
  j["within_expected_error"] = {{"rows", r.covered},
                                {"of", r.with_expected},
                                {"rows_leave_one_out", r.covered_leave_one_out},
                                {"gpu_left_out", coverage_json(r.gpu_left_out)},
                                {"source_left_out", coverage_json(r.source_left_out)}};
  nlohmann::json rows = nlohmann::json::array();
  for (const StepTimePoint& p : r.points) {
    nlohmann::json x = {{"line", p.row.line},
                        {"gpu", p.row.gpu},
                        {"model", p.row.model},
                        {"zoo_model", p.program.zoo_model},
                        {"precision", p.row.precision},
                        {"batch_size", p.row.batch_size},
                        {"fit", std::string(to_string(p.program.fit))},
                        {"variant", describe(p.program.options.variant)},
                        {"measured_ms", p.measured_ms},
                        {"predicted_ms", p.predicted_ms},
                        {"error_pct", p.signed_pct()},
                        {"approximations", p.program.approximations},
                        {"unsupported", p.program.unsupported}};
    if (p.row.seq_len) x["seq_len"] = p.row.seq_len;
    if (p.expected) x["expected_error_pct"] = {{"iteration", p.expected->pct.iteration}, {"basis", p.expected->basis}};
    rows.push_back(std::move(x));
  }
  j["rows"] = std::move(rows);
  nlohmann::json nc = nlohmann::json::array();
  for (const auto& [row, prog] : r.not_compared)
    nc.push_back({{"line", row.line},
                  {"gpu", row.gpu},
                  {"model", row.model},
                  {"precision", row.precision},
                  {"batch_size", row.batch_size},
                  {"why", prog.unsupported}});
  j["not_compared"] = std::move(nc);
  return j;
}

void print_step_times(const StepTimeReport& r, std::ostream& out) {
  auto pct = [](double v) { return fmt::format("{:.1f}", v); };
  auto table = [&](const std::string& title, const std::map<std::string, ErrorStats>& m) {
    std::size_t w = title.size();
    for (const auto& [k, v] : m) w = std::max(w, k.size());
    out << fmt::format("{:<{}}  {:>4}  {:>10}  {:>8}  {:>8}  {:>10}\n", title, w, "n", "median APE", "p90 APE",
                       "max APE", "median bias");
    for (const auto& [k, s] : m)
      out << fmt::format("{:<{}}  {:>4}  {:>10}  {:>8}  {:>8}  {:>+10.1f}\n", k, w, s.n, pct(s.median_ape_pct),
                         pct(s.p90_ape_pct), pct(s.max_ape_pct), s.median_bias_pct);
    out << '\n';
  };
  out << "calibration: " << r.calibration_source << "\n\n";
  table("all rows compared", {{"all", r.overall}});
  table("per GPU", r.per_gpu);
  table("per model family", r.per_family);
  table("per precision", r.per_precision);
  table("per family x precision", r.per_group);
  table("per source", r.per_source);
  table("per program fit", r.per_fit);
  out << fmt::format(
      "rows beyond 2x: {} of {}; within their stated expected error: {} of {} (leave one row out: {} of {})\n",
      r.beyond_2x, r.points.size(), r.covered, r.with_expected, r.covered_leave_one_out, r.with_expected);
  auto left_out = [&out](std::string_view what, const std::map<std::string, StepTimeReport::Coverage>& m) {
    int rows = 0, covered = 0;
    std::string each;
    for (const auto& [k, c] : m) {
      rows += c.rows;
      covered += c.covered;
      each += fmt::format("{}{} {}/{}", each.empty() ? "" : ", ", k, c.covered, c.rows);
    }
    out << fmt::format("within the error stated from the other {}' rows: {} of {} ({})\n", what, covered, rows, each);
  };
  left_out("GPUs", r.gpu_left_out);
  left_out("sources", r.source_left_out);
  out << '\n';
  std::vector<const StepTimePoint*> worst;
  for (const StepTimePoint& p : r.points) worst.push_back(&p);
  std::sort(worst.begin(), worst.end(),
            [](const StepTimePoint* a, const StepTimePoint* b) { return a->ape_pct() > b->ape_pct(); });
  out << "rows, worst first (line gpu model task precision batch[/seq]: measured -> predicted ms, error; expected)\n";
  for (const StepTimePoint* p : worst)
    out << fmt::format("  {:>3} {:<15} {:<11} {:<14} {:<4} {:>5}{:<5} {:>8.1f} -> {:>8.1f} ({:+6.0f}%) [{}]{}\n",
                       p->row.line, p->row.gpu, p->row.model, p->row.task, p->row.precision, p->row.batch_size,
                       p->row.seq_len ? fmt::format("/{}", p->row.seq_len) : std::string(), p->measured_ms,
                       p->predicted_ms, p->signed_pct(), to_string(p->program.fit),
                       p->expected ? fmt::format(" expected {:.0f}%", p->expected->pct.iteration) : std::string());
  if (!r.not_compared.empty()) {
    out << fmt::format("\nrows not compared: gpemu cannot express their program ({} of {})\n", r.not_compared.size(),
                       r.not_compared.size() + r.points.size());
    for (const auto& [row, prog] : r.not_compared)
      out << fmt::format("  {:>3} {:<15} {:<11} {:<14} {:<4} b{}: {}\n", row.line, row.gpu, row.model, row.task,
                         row.precision, row.batch_size, cost_detail::join(prog.unsupported, "; "));
  }
  bool any_unsupported = false;
  for (const StepTimePoint& p : r.points) any_unsupported |= p.program.fit == RowFit::Unsupported;
  if (any_unsupported) {
    out << "\nrows compared with the nearest program (--nearest): what differs\n";
    for (const StepTimePoint& p : r.points)
      if (p.program.fit == RowFit::Unsupported)
        out << fmt::format("  {:>3} {:<15} {:<11} {}: {}\n", p.row.line, p.row.gpu, p.row.model, p.program.zoo_model,
                           cost_detail::join(p.program.unsupported, "; "));
  }
}

}  // namespace gpemu

// The calibration file (data/calibration.json, calibration_json.h): the
// Calibration record's JSON form, read and checked field by field, and
// Calibration::load and save.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "cost/calibration_json.h"
#include "cost/host_profile_json.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

nlohmann::json errors_json(const PhaseErrors& e) {
  return {{"forward", e.forward}, {"backward", e.backward}, {"iteration", e.iteration}};
}

double number(const nlohmann::json& j, std::string_view key, const std::string& where) {
  auto it = j.find(std::string(key));
  if (it == j.end() || !it->is_number())
    throw InputError(fmt::format("{}: '{}' is missing or not a number; expected a number", where, key));
  const double v = it->get<double>();
  if (!std::isfinite(v)) throw InputError(fmt::format("{}: '{}' is not finite; expected a finite number", where, key));
  return v;
}

PhaseErrors errors_from(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object {{forward, backward, iteration}}", where));
  return {number(j, "forward", where), number(j, "backward", where), number(j, "iteration", where)};
}

std::map<std::string, PhaseErrors> errors_map(const nlohmann::json& j, const std::string& where) {
  std::map<std::string, PhaseErrors> out;
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object", where));
  for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = errors_from(it.value(), where + "." + it.key());
  return out;
}

std::map<std::string, ProgramEvidence> evidence_map(const nlohmann::json& j, const std::string& where) {
  std::map<std::string, ProgramEvidence> out;
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object", where));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string w = where + "." + it.key();
    if (!it.value().is_object()) throw InputError(fmt::format("{}: expected an object {{rows, p80, median}}", w));
    const double rows = number(it.value(), "rows", w);
    ProgramEvidence e{static_cast<int>(rows), number(it.value(), "p80", w), number(it.value(), "median", w)};
    if (!(rows >= 1 && rows <= 1e6 && rows == std::floor(rows)))
      throw InputError(fmt::format("{}: 'rows' is {}; expected a whole number from 1", w, rows));
    if (e.p80_pct < 0 || e.median_pct < 0) throw InputError(fmt::format("{}: errors must be 0 or more percent", w));
    out[it.key()] = e;
  }
  return out;
}

}  // namespace

nlohmann::json calibration_json(const Calibration& cal) {
  nlohmann::json j;
  j["format"] = std::string(kCalibrationFormat);
  j["source"] = cal.source;
  j["rows"] = cal.rows;
  j["fallback"] = std::string(to_string(cal.fallback));
  j["calibrated_families"] = cal.calibrated_families;
  if (!cal.step_time_families.empty()) j["step_time_families"] = cal.step_time_families;
  if (!cal.calibrated_gpus.empty()) j["calibrated_gpus"] = cal.calibrated_gpus;
  nlohmann::json fams = nlohmann::json::object();
  for (const auto& [name, f] : cal.families) {
    nlohmann::json o;
    o["origin"] = cal.origin_of(name);
    for (int i = 0; i < kFamilyFactorCount; ++i) o[family_factor_names()[i]] = factor_at(f, i);
    if (f.tensor_core_conv_efficiency > 0) o["tensor_core_conv_efficiency"] = f.tensor_core_conv_efficiency;
    if (f.tf32_conv_efficiency > 0) o["tf32_conv_efficiency"] = f.tf32_conv_efficiency;
    if (f.kernel_overhead_us > 0) o["kernel_overhead_us"] = f.kernel_overhead_us;
    fams[name] = o;
  }
  j["families"] = fams;
  nlohmann::json ms = nlohmann::json::object();
  for (const auto& [name, c] : cal.models)
    ms[name] = {{"forward_gpu", c.forward_gpu},
                {"forward_host", c.forward_host},
                {"backward_gpu", c.backward_gpu},
                {"backward_host", c.backward_host}};
  j["model_corrections"] = ms;
  nlohmann::json ee = nlohmann::json::object();
  auto put = [&](const char* key, const std::map<std::string, PhaseErrors>& m) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, v] : m) o[k] = errors_json(v);
    ee[key] = o;
  };
  put("in_sample", cal.in_sample);
  put("gpu_left_out", cal.gpu_left_out);
  put("models_left_out", cal.models_left_out);
  if (cal.gpu_left_out_overall) ee["gpu_left_out_overall"] = errors_json(*cal.gpu_left_out_overall);
  if (!cal.program_errors.empty()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, v] : cal.program_errors)
      o[k] = {{"rows", v.rows}, {"p80", v.p80_pct}, {"median", v.median_pct}};
    ee["programs"] = o;
    ee["programs_source"] = cal.program_errors_source;
  }
  j["expected_error_pct"] = ee;
  if (!cal.hosts.empty()) {
    nlohmann::json hs = nlohmann::json::object();
    for (const auto& [name, h] : cal.hosts) hs[name] = host_profile_json(h);
    j["hosts"] = hs;
  }
  return j;
}

Calibration calibration_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", where));
  const auto fmt_it = j.find("format");
  if (fmt_it == j.end() || !fmt_it->is_string() || fmt_it->get<std::string>() != kCalibrationFormat)
    throw InputError(fmt::format("{}: 'format' must be \"{}\"", where, kCalibrationFormat));
  Calibration c;
  if (auto it = j.find("source"); it != j.end() && it->is_string()) c.source = it->get<std::string>();
  if (auto it = j.find("rows"); it != j.end() && it->is_number_integer()) c.rows = it->get<int>();
  if (auto it = j.find("fallback"); it != j.end()) {
    const auto rule = parse_fallback_rule(it->is_string() ? it->get<std::string>() : "");
    if (!rule)
      throw InputError(fmt::format("{}: 'fallback' must be \"nearest\", \"geometric_mean\" or \"trend\"", where));
    c.fallback = *rule;
  }
  if (auto it = j.find("calibrated_families"); it != j.end()) {
    if (!it->is_array()) throw InputError(fmt::format("{}: 'calibrated_families' must be an array", where));
    for (const auto& f : *it) c.calibrated_families.push_back(f.get<std::string>());
  }
  if (auto it = j.find("step_time_families"); it != j.end()) {
    if (!it->is_array()) throw InputError(fmt::format("{}: 'step_time_families' must be an array", where));
    for (const auto& f : *it) {
      if (!f.is_string()) throw InputError(fmt::format("{}: 'step_time_families' must be an array of names", where));
      c.step_time_families.push_back(f.get<std::string>());
    }
  }
  if (auto it = j.find("calibrated_gpus"); it != j.end()) {
    if (!it->is_object())
      throw InputError(fmt::format("{}: 'calibrated_gpus' must be an object of GPU id lists", where));
    for (auto g = it->begin(); g != it->end(); ++g) {
      if (!g.value().is_array())
        throw InputError(fmt::format("{}: calibrated_gpus.{} must be an array of GPU ids", where, g.key()));
      for (const auto& id : g.value()) {
        if (!id.is_string())
          throw InputError(fmt::format("{}: calibrated_gpus.{} must be an array of GPU ids", where, g.key()));
        c.calibrated_gpus[g.key()].push_back(id.get<std::string>());
      }
    }
  }
  const auto fams = j.find("families");
  if (fams == j.end() || !fams->is_object())
    throw InputError(fmt::format("{}: 'families' is missing; expected an object of family factors", where));
  for (auto it = fams->begin(); it != fams->end(); ++it) {
    const std::string w = fmt::format("{}: families.{}", where, it.key());
    FamilyFactors f;
    for (int i = 0; i < kFamilyFactorCount; ++i) {
      const double v = number(it.value(), family_factor_names()[i], w);
      if (!(v > 0))
        throw InputError(fmt::format("{}: '{}' is {}; expected a number > 0", w, family_factor_names()[i], v));
      factor_at(f, i) = v;
    }
    for (auto [key, field] : {std::pair{"tensor_core_conv_efficiency", &FamilyFactors::tensor_core_conv_efficiency},
                              std::pair{"tf32_conv_efficiency", &FamilyFactors::tf32_conv_efficiency}})
      if (auto tc = it.value().find(key); tc != it.value().end()) {
        if (!tc->is_number() || !(tc->get<double>() > 0) || !(tc->get<double>() <= 1))
          throw InputError(fmt::format("{}: '{}' must be a number in (0, 1]", w, key));
        f.*field = tc->get<double>();
      }
    if (auto ko = it.value().find("kernel_overhead_us"); ko != it.value().end()) {
      if (!ko->is_number() || !(ko->get<double>() >= 0) || !(ko->get<double>() <= 1000))
        throw InputError(fmt::format("{}: 'kernel_overhead_us' must be a number of microseconds from 0 to 1000", w));
      f.kernel_overhead_us = ko->get<double>();
    }
    c.families[it.key()] = f;
    if (auto o = it.value().find("origin"); o != it.value().end() && o->is_string())
      c.origin[it.key()] = o->get<std::string>();
  }
  if (auto ms = j.find("model_corrections"); ms != j.end()) {
    if (!ms->is_object()) throw InputError(fmt::format("{}: 'model_corrections' must be an object", where));
    for (auto it = ms->begin(); it != ms->end(); ++it) {
      const std::string w = fmt::format("{}: model_corrections.{}", where, it.key());
      ModelCorrection m{number(it.value(), "forward_gpu", w), number(it.value(), "forward_host", w),
                        number(it.value(), "backward_gpu", w), number(it.value(), "backward_host", w)};
      if (!(m.forward_gpu > 0 && m.forward_host > 0 && m.backward_gpu > 0 && m.backward_host > 0))
        throw InputError(fmt::format("{}: corrections must be > 0", w));
      c.models[canonical_model_name(it.key())] = m;
    }
  }
  if (auto ee = j.find("expected_error_pct"); ee != j.end()) {
    const std::string w = where + ": expected_error_pct";
    if (auto it = ee->find("in_sample"); it != ee->end()) c.in_sample = errors_map(*it, w + ".in_sample");
    if (auto it = ee->find("gpu_left_out"); it != ee->end()) c.gpu_left_out = errors_map(*it, w + ".gpu_left_out");
    if (auto it = ee->find("models_left_out"); it != ee->end())
      c.models_left_out = errors_map(*it, w + ".models_left_out");
    if (auto it = ee->find("gpu_left_out_overall"); it != ee->end())
      c.gpu_left_out_overall = errors_from(*it, w + ".gpu_left_out_overall");
    if (auto it = ee->find("programs"); it != ee->end()) c.program_errors = evidence_map(*it, w + ".programs");
    if (auto it = ee->find("programs_source"); it != ee->end() && it->is_string())
      c.program_errors_source = it->get<std::string>();
  }
  if (auto hs = j.find("hosts"); hs != j.end()) {
    if (!hs->is_object()) throw InputError(fmt::format("{}: 'hosts' must be an object of host profiles", where));
    for (auto it = hs->begin(); it != hs->end(); ++it) {
      HostProfile h = host_profile_from_json(it.value(), fmt::format("{}: hosts.{}", where, it.key()));
      h.name = it.key();
      c.hosts[it.key()] = h;
    }
  }
  c.finish();
  return c;
}

Calibration Calibration::load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("{}: cannot open the calibration file", file.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past a double's range
    throw InputError(
        fmt::format("{}: not valid JSON ({}); expected a {} file", file.string(), e.what(), kCalibrationFormat));
  }
  return calibration_from_json(j, file.string());
}

void Calibration::save(const std::filesystem::path& file) const {
  if (file.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    if (ec)
      throw InputError(fmt::format("{}: cannot create the folder: {}", file.parent_path().string(), ec.message()));
  }
  write_file_atomically(file, calibration_json(*this).dump(2) + "\n", "calibration file", true);
}

}  // namespace gpemu

// Host profiles (include/gpemu/host.h): reading and writing them, and
// finding one by name in the calibration or as a file.
#include "gpemu/host.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/message_text.h"
#include "cost/host_profile_json.h"
#include "gpemu/calibration.h"
#include "gpemu/error.h"

namespace gpemu {

namespace {

using json = nlohmann::json;

struct Field {
  const char* name;
  double HostProfile::*member;
  double max;  // a host cost above this is a typo, not a host
};
constexpr Field kFields[] = {
    {"forward_us", &HostProfile::forward_us, 1e5},     {"backward_us", &HostProfile::backward_us, 1e5},
    {"optimizer_us", &HostProfile::optimizer_us, 1e5}, {"foreach_us", &HostProfile::foreach_us, 1e5},
    {"view_us", &HostProfile::view_us, 1e5},           {"sync_us", &HostProfile::sync_us, 1e6}};

std::string text(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (!it->is_string()) throw InputError(fmt::format("{}: '{}' must be a string", where, key));
  return it->get<std::string>();
}

}  // namespace

json host_profile_json(const HostProfile& h) {
  json j;
  j["format"] = std::string(kHostProfileFormat);
  j["name"] = h.name;
  j["description"] = h.description;
  j["source"] = h.source;
  j["torch"] = h.torch;
  for (const Field& f : kFields) j[f.name] = h.*f.member;
  j["launch_queue_depth"] = h.launch_queue_depth;
  return j;
}

HostProfile host_profile_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected a JSON object (a {} host profile)", where, kHostProfileFormat));
  if (auto it = j.find("format"); it != j.end() && (!it->is_string() || it->get<std::string>() != kHostProfileFormat))
    throw InputError(fmt::format("{}: 'format' must be \"{}\"", where, kHostProfileFormat));
  HostProfile h;
  h.name = text(j, "name", where);
  h.description = text(j, "description", where);
  h.source = text(j, "source", where);
  if (auto t = text(j, "torch", where); !t.empty()) h.torch = t;
  for (const Field& f : kFields) {
    auto it = j.find(f.name);
    if (it == j.end() && f.member == &HostProfile::foreach_us) {  // older files: one optimizer cost
      h.foreach_us = h.optimizer_us;
      continue;
    }
    if (it == j.end())
      throw InputError(fmt::format("{}: '{}' is missing; a host profile has {}", where, f.name,
                                   "forward_us, backward_us, optimizer_us, view_us, sync_us"));
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 || it->get<double>() > f.max)
      throw InputError(fmt::format("{}: '{}' is {}; expected microseconds from 0 to {:g}", where, f.name,
                                   printable_excerpt(it->dump(), 40), f.max));
    h.*f.member = it->get<double>();
  }
  if (auto it = j.find("launch_queue_depth"); it != j.end()) {
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 1 << 20)
      throw InputError(fmt::format("{}: 'launch_queue_depth' is {}; expected an integer from 1 to {}", where,
                                   printable_excerpt(it->dump(), 40), 1 << 20));
    h.launch_queue_depth = it->get<int>();
  }
  return h;
}

HostProfile read_host_profile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in)
    throw InputError(
        fmt::format("host profile {}: cannot open it; expected a {} file (gpemu bench host --out FILE) "
                    "or a built-in name",
                    file.string(), kHostProfileFormat));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("host profile {}: not valid JSON ({})", file.string(), e.what()));
  }
  HostProfile h = host_profile_from_json(j, "host profile " + file.string());
  if (h.name.empty()) h.name = file.stem().string();
  return h;
}

void write_host_profile(const HostProfile& host, const std::filesystem::path& file) {
  write_file_atomically(file, host_profile_json(host).dump(2) + "\n", "host profile", true);
}

}  // namespace gpemu

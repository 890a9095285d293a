// Writing gpemu's own profile format, "gpemu-profile/1" (docs/profiles.md):
// one row per line, numbers in their shortest form that reads back exactly.
#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "cost/native_profile_format.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace cost_detail;

namespace {

std::string number(double v) { return json(v).dump(); }

}  // namespace

std::string native_profile_json(const Profile& p) {
  std::string out = "{\n";
  auto field = [&](std::string_view key, const std::string& value) {
    out += fmt::format("  {}: {},\n", json(key).dump(), value);
  };
  field("format", json(kNativeProfileFormat).dump());
  field("gpu", json(p.gpu).dump());
  field("model", json(p.model).dump());
  field("precision", json(to_string(p.precision)).dump());
  field("host_memory", p.transfer_host_memory == HostMemoryKind::Pinned ? "\"pinned\"" : "\"pageable\"");
  if (p.input_bytes_per_sample > 0) field("input_bytes_per_sample", std::to_string(p.input_bytes_per_sample));
  if (p.oom_batch_size) field("oom_batch_size", std::to_string(*p.oom_batch_size));
  if (p.model_transfer_s) field("model_transfer_s", number(*p.model_transfer_s));
  if (!p.comment.empty()) field("comment", json(p.comment).dump());

  std::set<int> batches;
  for (const RowField& f : kRowFields)
    for (const ProfilePoint& q : p.*f.series) batches.insert(q.batch_size);
  out += "  \"rows\": [";
  bool first_row = true;
  for (int b : batches) {
    std::string row = fmt::format("{{\"batch_size\": {}", b);
    for (const RowField& f : kRowFields) {
      const Series& s = p.*f.series;
      auto it = std::lower_bound(s.begin(), s.end(), b, [](const ProfilePoint& q, int x) { return q.batch_size < x; });
      if (it != s.end() && it->batch_size == b) row += fmt::format(", \"{}\": {}", f.name, number(it->value));
    }
    row += "}";
    out += first_row ? "\n    " : ",\n    ";
    out += row;
    first_row = false;
  }
  out += first_row ? "]" : "\n  ]";
  if (!p.ops.empty()) {
    out += fmt::format(",\n  \"op_timer\": {},\n  \"ops\": [", json(p.op_timer).dump());
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const MeasuredOp& m = p.ops[i];
      std::string row = fmt::format("{{\"batch_size\": {}, \"phase\": {}, \"op\": {}, \"class\": {}, \"shapes\": {}",
                                    m.batch_size, json(m.phase).dump(), json(m.op).dump(), json(m.op_class).dump(),
                                    m.shapes.empty() ? std::string("[]") : json::parse(m.shapes).dump());
      if (!m.dtype.empty()) row += fmt::format(", \"dtype\": {}", json(m.dtype).dump());
      row += fmt::format(", \"calls_per_step\": {}, \"seconds_per_call\": {}", number(m.calls_per_step),
                         number(m.seconds_per_call));
      if (!m.kernels.empty()) row += fmt::format(", \"kernels\": {}", json(m.kernels).dump());
      out += (i == 0 ? "\n    " : ",\n    ") + row + "}";
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

fs::path write_native_profile(const Profile& p, const fs::path& dir) {
  if (p.gpu.empty() || p.model.empty()) throw InputError("cannot write a profile without a gpu and a model name");
  const fs::path folder = dir / p.gpu;
  const fs::path file = folder / (p.model + ".json");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create folder: {}", folder.string(), ec.message()));
  write_file_atomically(file, native_profile_json(p), "profile");
  return file;
}

}  // namespace gpemu

// Reading gpemu's own profile format, "gpemu-profile/1": one JSON file per
// (GPU, model) at <dir>/<gpu-id>/<model>.json (docs/profiles.md).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/fs_errors.h"
#include "common/json_keys.h"
#include "common/message_text.h"
#include "cost/json_source_lines.h"
#include "cost/native_profile_format.h"
#include "cost/text_fields.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"
#include "gpemu/zoo.h"

namespace gpemu {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace cost_detail;

namespace {

std::string row_field_names() {
  std::vector<std::string_view> names{"batch_size"};
  for (const RowField& f : kRowFields) names.push_back(f.name);
  return join(names);
}

class NativeReader {
 public:
  NativeReader(std::string path, const json& doc, SourceLines lines)
      : path_(std::move(path)), doc_(doc), lines_(std::move(lines)) {}

  Profile read() {
    if (!doc_.is_object())
      fail(1, "the document is not a JSON object", "an object with \"format\": \"gpemu-profile/1\"");
    for (const auto& [key, value] : doc_.items()) {
      if (std::find(std::begin(kTopFields), std::end(kTopFields), key) == std::end(kTopFields))
        fail(lines_.of_top(key), fmt::format("unknown field \"{}\"", key),
             fmt::format("the fields {}", join(kTopFields)));
    }
    std::string format = required_string("format");
    if (format != kNativeProfileFormat)
      fail(lines_.of_top("format"), fmt::format("format \"{}\" is not supported", format),
           fmt::format("\"{}\"", kNativeProfileFormat));

    Profile p;
    std::string gpu = required_string("gpu");
    const GpuSpec* spec = try_find_gpu(gpu);
    if (!spec) {
      std::string why;
      try {
        find_gpu(gpu);
      } catch (const InputError& e) {
        why = e.what();
      }
      fail(lines_.of_top("gpu"), fmt::format("gpu: {}", why), "a GPU in gpemu's catalog");
    }
    p.gpu = spec->id;
    p.model = canonical_model_name(required_string("model"));
    if (p.model.empty()) fail(lines_.of_top("model"), "model is empty", "a model name such as \"resnet50\"");

    if (auto s = optional_string("precision")) {
      try {
        p.precision = parse_precision(*s);
      } catch (const InputError& e) {
        fail(lines_.of_top("precision"), e.what(), "fp32, tf32, fp16, bf16 or fp8");
      }
    }
    if (auto s = optional_string("host_memory")) {
      std::string kind = to_lower(*s);
      if (kind == "pageable") {
        p.transfer_host_memory = HostMemoryKind::Pageable;
      } else if (kind == "pinned") {
        p.transfer_host_memory = HostMemoryKind::Pinned;
      } else {
        fail(lines_.of_top("host_memory"), fmt::format("host_memory \"{}\" is unknown", *s),
             "\"pageable\" or \"pinned\"");
      }
    }
    if (doc_.contains("input_bytes_per_sample") && !doc_["input_bytes_per_sample"].is_null()) {
      const json& v = doc_["input_bytes_per_sample"];
      if (!v.is_number_unsigned())
        fail(lines_.of_top("input_bytes_per_sample"), fmt::format("input_bytes_per_sample is {}", v.dump()),
             "a whole number of bytes >= 0");
      p.input_bytes_per_sample = v.get<std::uint64_t>();
    }
    if (doc_.contains("oom_batch_size") && !doc_["oom_batch_size"].is_null()) {
      const json& v = doc_["oom_batch_size"];
      std::optional<int> b = v.is_number() ? batch_size_from_double(v.get<double>()) : std::nullopt;
      if (!b)
        fail(lines_.of_top("oom_batch_size"), fmt::format("oom_batch_size is {}", v.dump()), "a whole number >= 1");
      p.oom_batch_size = *b;
    }
    if (doc_.contains("model_transfer_s") && !doc_["model_transfer_s"].is_null())
      p.model_transfer_s = non_negative(doc_["model_transfer_s"], lines_.of_top("model_transfer_s"), "model_transfer_s",
                                        "seconds", kMaxProfileSeconds);
    if (doc_.contains("comment") && !doc_["comment"].is_string())
      fail(lines_.of_top("comment"), "comment is not a string", "a string");
    if (doc_.contains("comment")) p.comment = doc_["comment"].get<std::string>();

    read_rows(p);
    read_ops(p);
    p.source = path_;
    return p;
  }

 private:
  [[noreturn]] void fail(int line, std::string_view what, std::string_view accepted) const {
    // Values from the file (a string holding "\n") print escaped: the message stays one line.
    throw InputError(one_line_message(fmt::format("{}:{}: {}; expected {}", path_, line, what, accepted)));
  }

  std::string required_string(const std::string& key) {
    if (!doc_.contains(key))
      fail(1, fmt::format("missing field \"{}\"", key), fmt::format("a string field \"{}\"", key));
    if (!doc_[key].is_string()) fail(lines_.of_top(key), fmt::format("{} is {}", key, doc_[key].dump()), "a string");
    return doc_[key].get<std::string>();
  }

  std::optional<std::string> optional_string(const std::string& key) {
    if (!doc_.contains(key) || doc_[key].is_null()) return std::nullopt;
    if (!doc_[key].is_string()) fail(lines_.of_top(key), fmt::format("{} is {}", key, doc_[key].dump()), "a string");
    return doc_[key].get<std::string>();
  }

  double non_negative(const json& v, int line, std::string_view name, std::string_view unit, double max) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > max)
      fail(line, fmt::format("{} is {}", name, v.dump()), fmt::format("a number from 0 to {:g} ({})", max, unit));
    return v.get<double>();
  }

  void read_rows(Profile& p) {
    if (!doc_.contains("rows")) fail(1, "missing field \"rows\"", "an array of rows, one per batch size");
    const json& rows = doc_["rows"];
    if (!rows.is_array()) fail(lines_.of_top("rows"), "rows is not an array", "an array of rows, one per batch size");

    std::map<int, int> seen;  // batch size -> line
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const json& row = rows[i];
      const int line = lines_.of_row(i);
      if (!row.is_object())
        fail(line, fmt::format("rows[{}] is {}", i, row.dump()),
             fmt::format("an object with the fields {}", row_field_names()));
      for (const auto& [key, value] : row.items()) {
        // A named copy: clang 14 (the fuzz build) cannot capture a structured binding.
        const std::string& name = key;
        bool known = name == "batch_size" || std::any_of(std::begin(kRowFields), std::end(kRowFields),
                                                         [&](const RowField& f) { return f.name == name; });
        if (!known)
          fail(lines_.of_row_key(i, key), fmt::format("rows[{}] has an unknown field \"{}\"", i, key),
               fmt::format("the fields {}", row_field_names()));
      }
      if (!row.contains("batch_size")) fail(line, fmt::format("rows[{}] has no batch_size", i), "a whole number >= 1");
      const json& b = row["batch_size"];
      std::optional<int> batch = b.is_number() ? batch_size_from_double(b.get<double>()) : std::nullopt;
      if (!batch)
        fail(lines_.of_row_key(i, "batch_size"), fmt::format("rows[{}].batch_size is {}", i, b.dump()),
             "a whole number >= 1");
      if (auto [it, fresh] = seen.emplace(*batch, line); !fresh)
        fail(line, fmt::format("batch size {} appears twice (first on line {})", *batch, it->second),
             "one row per batch size");
      for (const RowField& f : kRowFields) {
        auto it = row.find(f.name);
        if (it == row.end() || it->is_null()) continue;
        if (p.oom_batch_size && *batch >= *p.oom_batch_size && !f.possible_past_oom)
          fail(lines_.of_row_key(i, std::string(f.name)),
               fmt::format("rows[{}] has {} at batch size {}, but oom_batch_size {} says that batch did not "
                           "fit",
                           i, f.name, *batch, *p.oom_batch_size),
               "only transfer_s at or past oom_batch_size");
        double v = non_negative(*it, lines_.of_row_key(i, std::string(f.name)), fmt::format("rows[{}].{}", i, f.name),
                                f.unit, f.max);
        (p.*f.series).push_back({*batch, v});
      }
    }
    for (const RowField& f : kRowFields)
      std::sort((p.*f.series).begin(), (p.*f.series).end(),
                [](const ProfilePoint& a, const ProfilePoint& c) { return a.batch_size < c.batch_size; });
    // A compute time of 0 at every batch size is no measurement (a run
    // would take it as "measured" and predict steps of no time).
    for (const Series Profile::*series : {&Profile::forward_s, &Profile::backward_s}) {
      const Series& s = p.*series;
      if (!s.empty() && std::all_of(s.begin(), s.end(), [](const ProfilePoint& q) { return q.value == 0; }))
        fail(lines_.of_top("rows"),
             fmt::format("every row's {} is 0", series == &Profile::forward_s ? "forward_s" : "backward_s"),
             "measured times, above 0 at some batch size");
    }
  }

  // The optional per-op section: "op_timer" and "ops" (MeasuredOp), one op a
  // line, each at a batch size that has a row.
  void read_ops(Profile& p) {
    const bool has_ops = doc_.contains("ops") && !doc_["ops"].is_null();
    if (auto timer = optional_string("op_timer")) {
      if (std::find(std::begin(kOpTimers), std::end(kOpTimers), *timer) == std::end(kOpTimers))
        fail(lines_.of_top("op_timer"), fmt::format("op_timer \"{}\" is unknown", *timer), "\"cuda\" or \"cpu\"");
      p.op_timer = *timer;
    }
    if (!has_ops) {
      if (!p.op_timer.empty())
        fail(lines_.of_top("op_timer"), "op_timer is given but there are no \"ops\"", "both, or neither");
      return;
    }
    const json& ops = doc_["ops"];
    if (!ops.is_array())
      fail(lines_.of_top("ops"), "ops is not an array", "an array of per-op rows (docs/profiles.md)");
    if (p.op_timer.empty())
      fail(lines_.of_top("ops"), "ops without \"op_timer\"", "\"op_timer\": \"cuda\" or \"cpu\" beside \"ops\"");
    std::set<int> batches;
    for (const RowField& f : kRowFields)
      for (const ProfilePoint& q : p.*f.series) batches.insert(q.batch_size);
    std::map<std::tuple<int, std::string, std::string, std::string, std::string>, int> seen;  // -> line
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const json& o = ops[i];
      const int line = lines_.of_op(i);
      auto at = [&](std::string_view key) { return lines_.of_op_key(i, std::string(key)); };
      if (!o.is_object())
        fail(line, fmt::format("ops[{}] is {}", i, o.dump()),
             fmt::format("an object with the fields {}", join(kOpFields)));
      for (const auto& [key, value] : o.items()) {
        const std::string& name = key;  // clang 14 cannot capture a structured binding
        if (std::find(std::begin(kOpFields), std::end(kOpFields), name) == std::end(kOpFields))
          fail(at(name), fmt::format("ops[{}] has an unknown field \"{}\"", i, name),
               fmt::format("the fields {}", join(kOpFields)));
      }
      MeasuredOp m;
      const json* b = o.contains("batch_size") ? &o["batch_size"] : nullptr;
      std::optional<int> batch = b && b->is_number() ? batch_size_from_double(b->get<double>()) : std::nullopt;
      if (!batch)
        fail(at("batch_size"), fmt::format("ops[{}].batch_size is {}", i, b ? b->dump() : "missing"),
             "a whole number >= 1");
      if (!batches.count(*batch))
        fail(at("batch_size"), fmt::format("ops[{}] is at batch size {}, which has no row", i, *batch),
             "a batch size of \"rows\"");
      m.batch_size = *batch;
      m.phase = op_string(o, i, "phase");
      if (std::find(std::begin(kOpPhases), std::end(kOpPhases), m.phase) == std::end(kOpPhases))
        fail(at("phase"), fmt::format("ops[{}].phase \"{}\" is unknown", i, m.phase),
             fmt::format("one of {}", join(kOpPhases)));
      m.op = op_string(o, i, "op");
      if (m.op.empty())
        fail(at("op"), fmt::format("ops[{}].op is empty", i), "an aten op name such as \"aten::conv2d\"");
      m.op_class = op_string(o, i, "class");
      if (!zoo::parse_op_class(m.op_class))
        fail(at("class"), fmt::format("ops[{}].class \"{}\" is unknown", i, m.op_class),
             "a class of docs/model-zoo.md (conv, conv3d, matmul, norm, pooling, softmax, reduction, embedding, "
             "elementwise, copy, view, optimizer, other)");
      if (!o.contains("shapes") || !valid_shapes(o["shapes"]))
        fail(at("shapes"),
             fmt::format("ops[{}].shapes is {}", i, o.contains("shapes") ? o["shapes"].dump() : "missing"),
             "an array with one shape per input: an array of whole numbers >= 0, or an array of such arrays");
      m.shapes = o["shapes"].dump();
      if (o.contains("dtype") && !o["dtype"].is_null()) m.dtype = op_string(o, i, "dtype");
      m.calls_per_step = non_negative(o.contains("calls_per_step") ? o["calls_per_step"] : json(), at("calls_per_step"),
                                      fmt::format("ops[{}].calls_per_step", i), "calls", kMaxOpCallsPerStep);
      if (!(m.calls_per_step > 0))
        fail(at("calls_per_step"), fmt::format("ops[{}].calls_per_step is 0", i), "a number of calls > 0");
      m.seconds_per_call =
          non_negative(o.contains("seconds_per_call") ? o["seconds_per_call"] : json(), at("seconds_per_call"),
                       fmt::format("ops[{}].seconds_per_call", i), "seconds", kMaxProfileSeconds);
      if (o.contains("kernels") && !o["kernels"].is_null()) {
        const json& k = o["kernels"];
        if (!k.is_array() || !std::all_of(k.begin(), k.end(), [](const json& e) { return e.is_string(); }))
          fail(at("kernels"), fmt::format("ops[{}].kernels is not an array of strings", i), "an array of kernel names");
        for (const json& e : k) m.kernels.push_back(e.get<std::string>());
      }
      if (auto [it, fresh] = seen.emplace(std::tuple(m.batch_size, m.phase, m.op, m.shapes, m.dtype), line); !fresh)
        fail(line,
             fmt::format("ops[{}] repeats {} {} {} at batch size {} (first on line {})", i, m.phase, m.op, m.shapes,
                         m.batch_size, it->second),
             "one op row per (batch_size, phase, op, shapes, dtype)");
      p.ops.push_back(std::move(m));
    }
  }

  std::string op_string(const json& o, std::size_t i, std::string_view key) const {
    const std::string k(key);
    if (!o.contains(k) || !o[k].is_string())
      fail(lines_.of_op_key(i, k), fmt::format("ops[{}].{} is {}", i, key, o.contains(k) ? o[k].dump() : "missing"),
           "a string");
    return o[k].get<std::string>();
  }

  // One shape per input: whole numbers >= 0, or (a tensor list) arrays of them.
  static bool valid_shapes(const json& v) {
    auto dims = [](const json& s) {
      return s.is_array() && std::all_of(s.begin(), s.end(), [](const json& d) {
               return d.is_number_unsigned() || (d.is_number_integer() && d.get<std::int64_t>() >= 0);
             });
    };
    return v.is_array() && std::all_of(v.begin(), v.end(), [&](const json& s) {
             return dims(s) || (s.is_array() && std::all_of(s.begin(), s.end(), dims));
           });
  }

  std::string path_;
  const json& doc_;
  SourceLines lines_;
};

}  // namespace

Profile read_native_profile(const fs::path& file) {
  const std::string path = file.string();
  return parse_native_profile(read_text_file(path), path);
}

Profile parse_native_profile(std::string_view text, const std::string& path) {
  if (trim(text).empty())
    throw InputError(
        fmt::format("{}:1: empty file; expected a {} JSON document (docs/profiles.md)", path, kNativeProfileFormat));
  if (int line = line_past_nesting(text, kMaxJsonNesting))
    throw InputError(
        fmt::format("{}:{}: arrays and objects nested deeper than {} levels; expected a {} JSON "
                    "document, which nests at most 6 deep (docs/profiles.md)",
                    path, line, kMaxJsonNesting, kNativeProfileFormat));
  json doc;
  std::string twice;
  try {
    doc = parse_json_noting_duplicates(text, twice);
  } catch (const json::parse_error& e) {
    std::size_t end = std::min<std::size_t>(e.byte, text.size());
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
    throw InputError(
        fmt::format("{}:{}: not valid JSON ({}); expected a {} JSON document "
                    "(docs/profiles.md)",
                    path, line, e.what(), kNativeProfileFormat));
  } catch (const json::out_of_range& e) {
    // nlohmann names the number ("number overflow parsing '1e309'") but not where it is.
    const std::string what = e.what();
    const auto open = what.find('\''), close = what.rfind('\'');
    const std::string number = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    throw InputError(
        fmt::format("{}:{}: the number {} is too large to represent; expected numbers within "
                    "the range of a double (about 1.8e308)",
                    path, line_of_token(text, number), number.size() > 40 ? number.substr(0, 40) + "..." : number));
  }
  if (!twice.empty()) {
    // Where it is given the second time.
    const std::string token = json(twice).dump();
    const std::size_t first = text.find(token);
    const std::size_t second = first == std::string_view::npos ? first : text.find(token, first + 1);
    const std::size_t at = std::min(second == std::string_view::npos ? first : second, text.size());
    const int line =
        1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    throw InputError(
        fmt::format("{}:{}: the key {} is given twice in one object; expected each key once (JSON keeps "
                    "only the last)",
                    path, line, printable_excerpt(token, 60)));
  }
  return NativeReader(path, doc, scan_source_lines(text)).read();
}

std::vector<Profile> read_native_profiles(const fs::path& dir) {
  if (!is_folder(dir, "profiles"))
    throw InputError(fmt::format("{}: not a folder; expected <gpu-id>/<model>.json profiles", dir.string()));
  std::vector<fs::path> files;
  for (const auto& gpu_entry : list_folder(dir, "profiles")) {
    if (gpu_entry.path().filename().string().starts_with('.') || !is_folder(gpu_entry, "profiles")) continue;
    for (const auto& entry : list_folder(gpu_entry.path(), "profiles")) {
      if (entry.path().extension() == ".json" && !entry.path().filename().string().starts_with('.') &&
          is_file(entry, "profiles"))
        files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());

  std::vector<Profile> out;
  for (const fs::path& file : files) {
    Profile p = read_native_profile(file);
    const std::string folder = file.parent_path().filename().string();
    const GpuSpec* folder_gpu = try_find_gpu(folder);
    if (!folder_gpu || folder_gpu->id != p.gpu)
      throw InputError(
          fmt::format("{}: the file says gpu \"{}\" but lies in folder \"{}\"; expected it "
                      "under {}/",
                      file.string(), p.gpu, folder, p.gpu));
    if (canonical_model_name(file.stem().string()) != p.model)
      throw InputError(
          fmt::format("{}: the file says model \"{}\" but is named \"{}\"; expected "
                      "{}.json",
                      file.string(), p.model, file.filename().string(), p.model));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gpemu

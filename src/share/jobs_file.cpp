// The jobs file of `gpemu share` (share.h): JSON, every key checked.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_keys.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "gpemu/share.h"
#include "gpemu/spec_error.h"
#include "gpemu/zoo.h"
#include "share/job_entry.h"
#include "share/json_fields.h"

namespace gpemu {
namespace {

// An error from the engine in the jobs file's words: a SpecError's fields by
// the file's keys ("data.dataset" -> "dataset"), any other error as it is.
std::string in_file_words(const InputError& e) {
  static constexpr SpecFieldWord kKeys[] = {{"data.dataset", "dataset"}, {"data.model.storage", "storage"}};
  return worded_message(e, [](std::string_view f) { return word_of_spec_field(kKeys, f); });
}

constexpr std::size_t kMaxJobsFileBytes = 16u << 20;
constexpr std::int64_t kMaxBatch = 1 << 20;
constexpr std::int64_t kMaxIterations = kMaxSharedSteps;  // all jobs together: share.h
constexpr double kMaxArrivalS = 1e7;                      // 116 days
constexpr double kMinComputeS = 1e-9;                     // a nanosecond, the clock's tick: less rounds to no time
constexpr double kMaxComputeS = 3600;                     // an hour per step
constexpr int kMaxPriority = 1000;

constexpr std::int64_t kMaxEpochs = 1'000'000;
constexpr int kMaxWorkers = 1024;
constexpr double kMaxDecodeUs = 1e9;
constexpr int kMaxCores = 1 << 16;

const std::set<std::string, std::less<>> kJobKeys = {"name",       "model",           "compute_s", "batch_size",
                                                     "iterations", "arrival_s",       "priority",  "mig",
                                                     "precision",  "optimizer",       "dataset",   "epochs",
                                                     "workers",    "prefetch_factor", "decode_us", "decode_ns_per_byte",
                                                     "after",      "torch",           "host"};

std::string accepted_keys() {
  std::string s;
  for (const auto& k : kJobKeys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

struct Where {
  std::string_view source;
  std::string job;  // "job 2 ('a')" or "" at the top level
  std::string at(std::string_view key) const {
    return job.empty() ? fmt::format("{}: '{}'", source, key) : fmt::format("{}: {}, '{}'", source, job, key);
  }
};

[[noreturn]] void bad(const Where& w, std::string_view key, const nlohmann::json& v, std::string_view expected) {
  share_detail::bad_field(w.at(key), v, expected);
}

std::int64_t integer(const Where& w, std::string_view key, const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  return share_detail::integer_field(w.at(key), v, lo, hi);
}

double number(const Where& w, std::string_view key, const nlohmann::json& v, double lo, double hi, bool lo_open) {
  return share_detail::number_field(w.at(key), v, lo, hi, lo_open);
}

std::string text(const Where& w, std::string_view key, const nlohmann::json& v) {
  return share_detail::text_field(w.at(key), v);
}

SharedJobSpec parse_job(const nlohmann::json& j, std::size_t index, std::string_view source) {
  Where w{source, fmt::format("job {}", index + 1)};
  if (!j.is_object()) bad(Where{source, ""}, fmt::format("jobs[{}]", index), j, "an object of job keys");
  std::string name = fmt::format("job{}", index + 1);
  if (auto it = j.find("name"); it != j.end()) name = text(w, "name", *it);
  w.job = fmt::format("job {} ('{}')", index + 1, name);
  for (const auto& [key, value] : j.items())
    if (!kJobKeys.contains(key))
      throw InputError(fmt::format("{}: {}: unknown key '{}'; a job takes {}", source, w.job, key, accepted_keys()));
  const bool has_model = j.contains("model"), has_fixed = j.contains("compute_s");
  if (has_model == has_fixed)
    throw InputError(
        fmt::format("{}: {}: give either 'model' (a model of 'gpemu models') or 'compute_s' (a fixed GPU "
                    "time per step), not {}",
                    source, w.job, has_model ? "both" : "neither"));
  int batch = 64;
  if (auto it = j.find("batch_size"); it != j.end())
    batch = static_cast<int>(integer(w, "batch_size", *it, 1, kMaxBatch));
  const bool has_dataset = j.contains("dataset");
  for (const char* key : {"epochs", "workers", "prefetch_factor", "decode_us", "decode_ns_per_byte"})
    if (!has_dataset && j.contains(key))
      throw InputError(fmt::format("{}: {}: '{}' is for a job with a 'dataset' (its batches come from a loader)",
                                   source, w.job, key));
  if (has_dataset && has_fixed)
    throw InputError(
        fmt::format("{}: {}: 'dataset' is for a 'model' job; a 'compute_s' job's steps need no data", source, w.job));
  std::int64_t iterations = has_dataset ? 0 : 100;
  if (auto it = j.find("iterations"); it != j.end()) iterations = integer(w, "iterations", *it, 1, kMaxIterations);
  SharedJobSpec s =
      has_model ? model_job(name, text(w, "model", j.at("model")), batch, iterations)
                : fixed_step_job(name, number(w, "compute_s", j.at("compute_s"), kMinComputeS, kMaxComputeS, false),
                                 batch, iterations);
  JobSpec& job = s.job;
  if (has_dataset) {
    std::uint64_t epochs = 1;
    if (auto it = j.find("epochs"); it != j.end())
      epochs = static_cast<std::uint64_t>(integer(w, "epochs", *it, 1, kMaxEpochs));
    int workers = 4;
    if (auto it = j.find("workers"); it != j.end())
      workers = static_cast<int>(integer(w, "workers", *it, 0, kMaxWorkers));
    try {
      with_dataset(s, text(w, "dataset", j.at("dataset")), workers, epochs);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}: {}", source, w.job, in_file_words(e)));
    }
    if (iterations > 0) job.schedule.max_iterations = iterations;
    if (auto it = j.find("prefetch_factor"); it != j.end())
      job.data.loader.prefetch_factor = static_cast<int>(integer(w, "prefetch_factor", *it, 1, 1024));
    if (auto it = j.find("decode_us"); it != j.end())
      job.data.model.decode_per_sample = from_seconds(number(w, "decode_us", *it, 0, kMaxDecodeUs, false) * 1e-6);
    if (auto it = j.find("decode_ns_per_byte"); it != j.end())
      job.data.model.decode_ns_per_byte = number(w, "decode_ns_per_byte", *it, 0, kMaxDecodeUs, false);
  }
  try {
    if (auto it = j.find("precision"); it != j.end())
      job.compute.model.precision = zoo::parse_precision(text(w, "precision", *it));
    if (auto it = j.find("optimizer"); it != j.end())
      job.compute.model.optimizer = zoo::parse_optimizer(text(w, "optimizer", *it));
    for (const char* key : {"torch", "host"})
      if (!has_model && j.contains(key))
        throw InputError(
            fmt::format("'{}' applies to a job with a \"model\"; a \"compute_s\" job's step time is given", key));
    // The program of the PyTorch a model job names (2 unless "torch": "1"),
    // as `gpemu train --torch` runs it, and the host that issues its steps
    // (a name or a `gpemu bench host` file, as --host): give_cost_models
    // applies them.
    if (has_model) {
      s.torch = j.contains("torch") ? text(w, "torch", j.at("torch")) : "2";
      if (s.torch != "1" && s.torch != "2")
        throw InputError(fmt::format(
            "torch '{}': accepted \"1\" (PyTorch 1.x's program, as GPEmu's profiles were measured) or \"2\" "
            "(PyTorch 2's, the default)",
            printable_excerpt(s.torch, 40)));
      if (auto it = j.find("host"); it != j.end()) s.host = text(w, "host", *it);
    }
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}: {}", source, w.job, in_file_words(e)));
  }
  if (auto it = j.find("arrival_s"); it != j.end())
    s.arrival = from_seconds(number(w, "arrival_s", *it, 0, kMaxArrivalS, false));
  if (auto it = j.find("priority"); it != j.end())
    s.priority = static_cast<int>(integer(w, "priority", *it, -kMaxPriority, kMaxPriority));
  if (auto it = j.find("mig"); it != j.end()) s.mig = text(w, "mig", *it);
  if (auto it = j.find("after"); it != j.end()) s.after = text(w, "after", *it);
  return s;
}

}  // namespace

namespace share_detail {

SharedJobSpec parse_job_entry(const nlohmann::json& entry, std::string_view source) {
  // "torch": null is the C++ API's job (SharedJobSpec::torch empty): its
  // ModelSpec as it is, no PyTorch preset.
  const bool as_given = entry.is_object() && entry.contains("torch") && entry.at("torch").is_null();
  try {
    if (!as_given) return parse_job(entry, 0, source);
    nlohmann::json e = entry;
    e.erase("torch");
    SharedJobSpec s = parse_job(e, 0, source);
    s.torch.clear();
    return s;
  } catch (const InputError& e) {
    throw InputError(one_line_message(e.what()));
  }
}

nlohmann::json job_entry_json(const SharedJobSpec& s) {
  const JobSpec& job = s.job;
  nlohmann::json e = {{"name", s.name}, {"batch_size", job.batch_size}, {"iterations", job.data.synthetic_batches}};
  if (job.compute.step_time == StepTime::Fixed) {
    e["compute_s"] = job.compute.fixed_train.expected();
    return e;
  }
  e["model"] = job.compute.model.name;
  e["precision"] = zoo::to_string(job.compute.model.precision);
  e["optimizer"] = zoo::to_string(job.compute.model.optimizer);
  e["torch"] = s.torch.empty() ? nlohmann::json() : nlohmann::json(s.torch);
  if (!s.host.empty()) {
    // A host profile's file is named as the client sees it; the server may
    // run in another folder.
    std::error_code ec;
    const std::filesystem::path file(s.host);
    e["host"] = file.is_relative() && std::filesystem::is_regular_file(file, ec)
                    ? std::filesystem::absolute(file, ec).string()
                    : s.host;
  }
  return e;
}

}  // namespace share_detail

SharedJobSpec model_job(std::string name, std::string model, int batch_size, std::int64_t iterations, Time arrival) {
  SharedJobSpec s;
  s.name = std::move(name);
  s.arrival = arrival;
  s.job.compute.model.name = std::move(model);
  s.job.batch_size = batch_size;
  s.job.data.source = DataSource::Synthetic;
  s.job.data.synthetic_batches = iterations;
  s.job.schedule.epochs = 1;
  return s;
}

void with_dataset(SharedJobSpec& s, std::string_view dataset, int workers, std::uint64_t epochs) {
  JobSpec& job = s.job;
  job.data.source = DataSource::Modelled;
  job.data.dataset = pipeline::virtual_dataset(dataset);
  job.data.loader.num_workers = workers;
  job.schedule.epochs = epochs;
  job.schedule.max_iterations = -1;
}

SharedJobSpec fixed_step_job(std::string name, double step_s, int batch_size, std::int64_t iterations, Time arrival) {
  SharedJobSpec s = model_job(std::move(name), "", batch_size, iterations, arrival);
  s.job.compute.step_time = StepTime::Fixed;
  s.job.compute.fixed_train = TimeSpec::constant(step_s);
  s.job.compute.fixed_eval = TimeSpec::constant(step_s);
  s.job.compute.copy_batch = false;
  s.job.compute.use_allocator = false;
  return s;
}

namespace {

JobsFile parse_jobs_text(std::string_view text_in, std::string_view source) {
  if (text_in.size() > kMaxJobsFileBytes)
    throw InputError(fmt::format("{}: {} bytes is too large for a jobs file (at most {} MiB)", source, text_in.size(),
                                 kMaxJobsFileBytes >> 20));
  nlohmann::json root;
  std::string twice;
  try {
    root = parse_json_noting_duplicates(text_in, twice);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("{}: not valid JSON ({}); a jobs file is a JSON object with a 'jobs' list "
                    "(docs/sharing.md)",
                    source, e.what()));
  }
  if (!twice.empty())
    throw InputError(
        fmt::format("{}: the key '{}' is given twice in one object; give each key once (JSON keeps "
                    "only the last)",
                    source, printable_excerpt(twice, 60)));
  const Where top{source, ""};
  if (!root.is_object()) bad(top, "(file)", root, "an object with 'jobs' (and optionally 'gpu', 'cores', 'storage')");
  for (const auto& [key, value] : root.items())
    if (key != "jobs" && key != "gpu" && key != "cores" && key != "storage")
      throw InputError(
          fmt::format("{}: unknown key '{}'; the file takes 'gpu', 'cores', 'storage' and 'jobs'", source, key));
  JobsFile out;
  if (auto it = root.find("gpu"); it != root.end()) out.gpu = text(top, "gpu", *it);
  if (auto it = root.find("cores"); it != root.end())
    out.cores = static_cast<int>(integer(top, "cores", *it, 1, kMaxCores));
  if (auto it = root.find("storage"); it != root.end()) {
    const std::string device = text(top, "storage", *it);
    try {
      out.storage = pipeline::parse_storage(device);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", top.at("storage"), in_file_words(e)));
    }
  }
  auto jobs = root.find("jobs");
  if (jobs == root.end() || !jobs->is_array() || jobs->empty() || jobs->size() > kMaxSharedJobs)
    bad(top, "jobs", jobs == root.end() ? nlohmann::json() : *jobs,
        fmt::format("a list of 1 to {} jobs", kMaxSharedJobs));
  std::set<std::string, std::less<>> names;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    out.jobs.push_back(parse_job((*jobs)[i], i, source));
    if (!names.insert(out.jobs.back().name).second)
      throw InputError(fmt::format("{}: job {}: the name '{}' is taken by an earlier job; names must differ", source,
                                   i + 1, out.jobs.back().name));
    const std::string& after = out.jobs.back().after;
    if (!after.empty() && (after == out.jobs.back().name || !names.contains(after)))
      throw InputError(
          fmt::format("{}: job {} ('{}'): 'after' is '{}': name an earlier job (a queue runs in file order)", source,
                      i + 1, out.jobs.back().name, after));
  }
  return out;
}

}  // namespace

JobsFile parse_jobs(std::string_view text, std::string_view source) {
  try {
    return parse_jobs_text(text, source);
  } catch (const InputError& e) {
    // The file's keys, names and values are quoted in messages; a message
    // stays one line whatever bytes they hold.
    throw InputError(one_line_message(e.what()));
  }
}

JobsFile load_jobs_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("jobs file {}: is a directory; give a JSON file", one_line_message(path.string())));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(
        fmt::format("jobs file {}: cannot be opened (missing or unreadable)", one_line_message(path.string())));
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxJobsFileBytes) break;
  }
  return parse_jobs(text, fmt::format("jobs file {}", path.string()));
}

}  // namespace gpemu

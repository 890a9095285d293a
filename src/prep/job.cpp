#include "prep/job.h"

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/pipeline/loader.h"
#include "gpemu/pipeline/sampler.h"

namespace gpemu::prep {
namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, std::uint64_t lo, std::uint64_t hi) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    throw InputError(fmt::format("preprocessing job: '{}' is missing or not a whole number", key));
  const bool negative = !it->is_number_unsigned() && it->get<std::int64_t>() < 0;
  const std::uint64_t v = negative ? 0 : it->get<std::uint64_t>();
  if (negative || v < lo || v > hi)
    throw InputError(fmt::format("preprocessing job: '{}' {} is outside {} to {}", key, it->dump(), lo, hi));
  return static_cast<T>(v);
}

bool flag(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_boolean())
    throw InputError(fmt::format("preprocessing job: '{}' is missing or not true/false", key));
  return it->get<bool>();
}

pipeline::LoaderOptions loader_options(const PrepJob& job) {
  pipeline::LoaderOptions o;
  o.batch_size = job.batch_size;
  o.shuffle = job.shuffle;
  o.seed = job.seed;
  o.drop_last = job.drop_last;
  o.transform = job.transform;
  return o;
}

}  // namespace

nlohmann::json job_json(const PrepJob& job) {
  return {{"dataset", job.dataset},
          {"batch_size", job.batch_size},
          {"seed", job.seed},
          {"shuffle", job.shuffle},
          {"drop_last", job.drop_last},
          {"offload", pipeline::to_string(job.offload)},
          {"height", job.transform.height},
          {"width", job.transform.width},
          {"full_validation", job.jpeg_validation == pipeline::JpegValidation::Full}};
}

PrepJob job_from_json(const nlohmann::json& j) {
  PrepJob job;
  const auto d = j.find("dataset");
  if (d == j.end() || !d->is_string() || d->get<std::string>().empty())
    throw InputError("preprocessing job: 'dataset' (the image folder as the workers see it) is missing");
  job.dataset = d->get<std::string>();
  job.batch_size = field<std::size_t>(j, "batch_size", 1, 1 << 20);
  job.seed = field<std::uint64_t>(j, "seed", 0, UINT64_MAX);
  job.shuffle = flag(j, "shuffle");
  job.drop_last = flag(j, "drop_last");
  const auto o = j.find("offload");
  if (o == j.end() || !o->is_string()) throw InputError("preprocessing job: 'offload' is missing: read, decode or all");
  job.offload = pipeline::parse_prep_offload(o->get<std::string>(), "preprocessing job's offload");
  if (job.offload == pipeline::PrepOffload::None)
    throw InputError("preprocessing job: offload 'none' leaves the workers nothing to do: read, decode or all");
  job.transform.height = field<int>(j, "height", 1, 16384);
  job.transform.width = field<int>(j, "width", 1, 16384);
  job.jpeg_validation =
      flag(j, "full_validation") ? pipeline::JpegValidation::Full : pipeline::JpegValidation::Truncation;
  return job;
}

pipeline::Dataset open_job_dataset(const PrepJob& job) {
  pipeline::Dataset ds;
  try {
    ds = pipeline::open_dataset_folder(job.dataset);
  } catch (const Error& e) {
    throw InputError(fmt::format("preprocessing job: the dataset '{}' cannot be opened: {}", job.dataset, e.what()));
  }
  if (ds.samples.empty()) throw InputError(fmt::format("preprocessing job: '{}' holds no samples", job.dataset));
  for (const auto& s : ds.samples)
    if (s.format != pipeline::SampleFormat::Jpeg || ds.page_size != 0 || ds.group_size != 1)
      throw InputError(fmt::format(
          "preprocessing job: '{}' is not a folder of JPEG files ('{}' is not one); the service serves JPEG "
          "image folders",
          job.dataset, s.path));
  return ds;
}

std::vector<std::vector<std::size_t>> epoch_batches(const PrepJob& job, std::size_t samples, std::uint64_t epoch) {
  const pipeline::LoaderOptions o = loader_options(job);
  const pipeline::Sampler sampler(samples, pipeline::sampler_options(o));
  const std::vector<std::size_t> order = sampler.indices(epoch);
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < order.size(); i += job.batch_size) {
    const std::size_t end = std::min(order.size(), i + job.batch_size);
    if (end - i < job.batch_size && job.drop_last) break;
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

std::size_t batches_per_epoch(const PrepJob& job, std::size_t samples) {
  return job.drop_last ? samples / job.batch_size : (samples + job.batch_size - 1) / job.batch_size;
}

}  // namespace gpemu::prep

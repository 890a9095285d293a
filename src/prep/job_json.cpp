// A preprocessing-service job's JSON (prep/job.h), apart from its dataset
// and batches so that the fuzz harness of the wire protocol links it alone.
#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"
#include "prep/job.h"

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
  if (has_control_characters(job.dataset) || job.dataset.size() > 4096)
    throw InputError(
        fmt::format("preprocessing job: the dataset path '{}' is not a path (control characters or "
                    "over 4096 bytes)",
                    printable_excerpt(job.dataset, 80)));
  job.batch_size = field<std::size_t>(j, "batch_size", 1, 1 << 20);
  job.seed = field<std::uint64_t>(j, "seed", 0, UINT64_MAX);
  job.shuffle = flag(j, "shuffle");
  job.drop_last = flag(j, "drop_last");
  const auto o = j.find("offload");
  if (o == j.end() || !o->is_string()) throw InputError("preprocessing job: 'offload' is missing: read, decode or all");
  const std::string offload = o->get<std::string>();
  if (offload != "read" && offload != "decode" && offload != "all")
    throw InputError(fmt::format("preprocessing job: offload '{}' is not one the workers run: read, decode or all",
                                 printable_excerpt(offload, 40)));
  job.offload = pipeline::parse_prep_offload(offload);
  job.transform.height = field<int>(j, "height", 1, 16384);
  job.transform.width = field<int>(j, "width", 1, 16384);
  job.jpeg_validation =
      flag(j, "full_validation") ? pipeline::JpegValidation::Full : pipeline::JpegValidation::Truncation;
  return job;
}

}  // namespace gpemu::prep

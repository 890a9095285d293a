// A preprocessing-service job (prep_serve.h's PrepJob) on the wire and on
// the workers' side: its JSON, its checks, its dataset, and which of an
// epoch's batches are whose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpemu/pipeline/dataset.h"
#include "gpemu/prep_serve.h"

namespace gpemu::prep {

nlohmann::json job_json(const PrepJob& job);
// InputError naming the field for what is missing or impossible.
PrepJob job_from_json(const nlohmann::json& j);
// The job's folder as a dataset of JPEGs; InputError naming it when it
// cannot be opened, holds no samples, or holds other samples than JPEGs.
pipeline::Dataset open_job_dataset(const PrepJob& job);
// The epoch's batches (dataset indices), in the loader's order: its sampler
// over the dataset (one rank), cut into batch_size pieces.
std::vector<std::vector<std::size_t>> epoch_batches(const PrepJob& job, std::size_t samples, std::uint64_t epoch);
// Batches an epoch has.
std::size_t batches_per_epoch(const PrepJob& job, std::size_t samples);

}  // namespace gpemu::prep

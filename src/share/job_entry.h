// One job of a jobs file as JSON (docs/sharing.md, "The jobs file"): what
// `share --connect` sends a server for it to run (serve.h, op "job"), and
// how the server reads it back with the jobs file's own checks.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "gpemu/share.h"

namespace gpemu::share_detail {

// A jobs file's job entry, every key checked as in a jobs file (InputError
// naming `source`, the job and the key); "torch": null is a job whose
// ModelSpec is taken as it is (SharedJobSpec::torch empty, the C++ API's).
SharedJobSpec parse_job_entry(const nlohmann::json& entry, std::string_view source);

// The entry of a job of in-memory batches (a model's or a fixed step's):
// name, model or compute_s, batch_size, iterations, precision, optimizer,
// torch (null when empty) and host (a host profile's file made absolute). Its arrival, queue,
// priority and slice are the caller's to give elsewhere.
nlohmann::json job_entry_json(const SharedJobSpec& job);

}  // namespace gpemu::share_detail

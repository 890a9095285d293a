// A `gpemu share` result as JSON (share.h has the result).
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/share.h"

namespace gpemu {

// Every figure of the result; utilization as a list of percent. with_steps:
// each job's steps too ("steps": {"end_s": [...], "samples": [...]}).
nlohmann::json share_json(const ShareResult& result, bool with_steps = false);
// One job's figures, as share_json's "jobs" give them (the Python Session's outcomes too).
nlohmann::json shared_job_json(const SharedJobResult& job, bool with_steps = false);

}  // namespace gpemu

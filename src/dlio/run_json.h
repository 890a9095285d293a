// The JSON of a DLIO run (`gpemu train --dlio-config --json`), written from
// its typed record at the edge. Keys are the record's fields' names; a
// training run's phase figures sit at the top level, evaluation's under
// "eval"; MB = 2^20 bytes as DLIO prints.
#pragma once

#include <nlohmann/json.hpp>

#include "gpemu/dlio/result.h"

namespace gpemu::dlio {

nlohmann::json dlio_run_json(const DlioRunRecord& r);
nlohmann::json dlio_epoch_json(const DlioEpoch& e);
nlohmann::json dlio_loader_json(const DlioLoaderSummary& l);

}  // namespace gpemu::dlio

#include "report/configuration_rows.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace gpemu {

namespace {

// Flattens a JSON value into (dotted key, printed value) rows.
void flatten(const nlohmann::json& j, const std::string& key, std::vector<SummaryRow>& rows) {
  auto scalar_array = [](const nlohmann::json& a) {
    return std::all_of(a.begin(), a.end(), [](const nlohmann::json& e) { return !e.is_structured(); });
  };
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), key.empty() ? it.key() : key + "." + it.key(), rows);
  } else if (j.is_array() && !j.empty() && !scalar_array(j)) {
    for (std::size_t i = 0; i < j.size(); ++i) flatten(j[i], fmt::format("{}[{}]", key, i), rows);
  } else if (j.is_string()) {
    rows.push_back(SummaryRow{key, j.get<std::string>()});
  } else {
    rows.push_back(SummaryRow{key, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  }
}

}  // namespace

std::vector<SummaryRow> configuration_rows(const nlohmann::json& configuration) {
  std::vector<SummaryRow> rows;
  if (configuration.is_null() || (configuration.is_structured() && configuration.empty())) return rows;
  flatten(configuration, "", rows);
  return rows;
}

}  // namespace gpemu

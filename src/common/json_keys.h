// JSON inputs whose objects give a key twice. nlohmann keeps the last value
// silently ({"iterations": 5, "iterations": 7} reads 7), so a file edited by
// hand can say one thing and mean another; gpemu's JSON inputs refuse it.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu {

// nlohmann::json::parse(text) (throwing what it throws) that also sets
// `duplicate` to the first key given twice in one object, if any.
inline nlohmann::json parse_json_noting_duplicates(std::string_view text, std::string& duplicate) {
  std::vector<std::set<std::string, std::less<>>> open;  // the keys of each object being read
  duplicate.clear();
  return nlohmann::json::parse(text, [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && parsed.is_string() &&
        !open.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  });
}

}  // namespace gpemu

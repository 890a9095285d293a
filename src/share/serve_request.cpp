#include "share/serve_request.h"

#include <fmt/format.h>

#include "gpemu/error.h"
#include "share/json_fields.h"

namespace gpemu::share_detail {

Framed take_line(std::string& buffer, std::string& line) {
  if (const auto nl = buffer.find('\n'); nl != std::string::npos) {
    line.assign(buffer, 0, nl);
    buffer.erase(0, nl + 1);
    return Framed::Line;
  }
  return buffer.size() > kMaxServeLine ? Framed::TooLong : Framed::More;
}

nlohmann::json parse_request(std::string_view line) {
  nlohmann::json m = nlohmann::json::parse(line);
  if (!m.is_object()) throw InputError("a request is a JSON object with an 'op'");
  return m;
}

std::string request_op(const nlohmann::json& request) {
  const auto it = request.find("op");
  return it != request.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t request_int(const nlohmann::json& request, const char* key, std::int64_t lo, std::int64_t hi,
                         std::int64_t def, bool required) {
  auto it = request.find(key);
  if (it == request.end()) {
    if (required) throw InputError(fmt::format("'{}' is missing: expected an integer from {} to {}", key, lo, hi));
    return def;
  }
  return integer_field(fmt::format("'{}'", key), *it, lo, hi);
}

float request_demand(const nlohmann::json& request, const char* key) {
  auto it = request.find(key);
  if (it == request.end()) return 1.0F;
  return static_cast<float>(number_field(fmt::format("'{}'", key), *it, 0, 1));
}

std::string request_string(const nlohmann::json& request, const char* key, std::string def) {
  auto it = request.find(key);
  if (it == request.end()) return def;
  return text_field(fmt::format("'{}'", key), *it, /*allow_empty=*/true);
}

std::string reply_line(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace gpemu::share_detail

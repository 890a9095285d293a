#include "common/json_spec_file.h"
#include "common/message_text.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu {
namespace {

// Larger than any spec needs; a bigger file is a mistake, not a spec.
constexpr std::streamoff kMaxSpecFileBytes = 1 << 20;

}  // namespace

JsonSpecFile::JsonSpecFile(std::string what, std::string path, std::vector<std::string> keys, const std::string& hint)
    : what_(std::move(what)), path_(std::move(path)) {
  // Not a regular file (a FIFO, whose open waits for a writer; a device,
  // endless; a folder): refused before it is opened.
  std::error_code ec;
  const auto status = std::filesystem::status(path_, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw InputError(fmt::format("{} {}: not a regular file; give {} or a JSON file", what_, path_, hint));
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw InputError(fmt::format("{} {}: cannot be read; give {} or a readable JSON file", what_, path_, hint));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxSpecFileBytes)
    throw InputError(fmt::format("{} {}: {} bytes; a spec file is a small JSON object of at most {} bytes", what_,
                                 path_, static_cast<long long>(size), static_cast<long long>(kMaxSpecFileBytes)));
  in.seekg(0);
  std::stringstream text;
  text << in.rdbuf();
  try {
    json_ = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past a double's range
    throw InputError(fmt::format("{} {}: not valid JSON ({})", what_, path_, e.what()));
  }
  std::string accepted;
  for (const std::string& k : keys) accepted += (accepted.empty() ? "" : ", ") + k;
  if (!json_.is_object())
    throw InputError(fmt::format("{} {}: expected a JSON object with the keys {}", what_, path_, accepted));
  for (const auto& [key, value] : json_.items()) {
    bool known = false;
    for (const std::string& k : keys) known = known || key == k;
    if (!known)
      throw InputError(
          fmt::format("{} {}: unknown key '{}'; accepted: {}", what_, path_, one_line_message(key), accepted));
  }
}

double JsonSpecFile::number(const char* key, bool required, double fallback, double lo, double hi, bool lo_open) const {
  if (!json_.contains(key)) {
    if (required) throw InputError(fmt::format("{} {}: missing key '{}'", what_, path_, key));
    return fallback;
  }
  const auto& v = json_[key];
  if (!v.is_number()) throw InputError(fmt::format("{} {}: '{}' must be a number", what_, path_, key));
  const double x = v.get<double>();
  if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
    throw InputError(
        fmt::format("{} {}: '{}' is {}; accepted {}{}, {}]", what_, path_, key, x, lo_open ? "(" : "[", lo, hi));
  return x;
}

long long JsonSpecFile::whole(const char* key, bool required, long long fallback, long long lo, long long hi) const {
  const double x =
      number(key, required, static_cast<double>(fallback), static_cast<double>(lo), static_cast<double>(hi));
  if (x != std::floor(x)) throw InputError(fmt::format("{} {}: '{}' must be a whole number", what_, path_, key));
  return static_cast<long long>(x);
}

std::string JsonSpecFile::text(const char* key, std::string fallback) const {
  if (!json_.contains(key)) return fallback;
  if (!json_[key].is_string()) throw InputError(fmt::format("{} {}: '{}' must be a string", what_, path_, key));
  return json_[key].get<std::string>();
}

}  // namespace gpemu

// A small JSON object read from a file that describes one thing (a network,
// a storage device): its keys are checked against the accepted ones, and
// numbers against their ranges, with errors that name the file and the key.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpemu {

class JsonSpecFile {
 public:
  // `what` names the kind in errors ("network file", "storage file"); `keys`
  // are the accepted keys; `hint` says what else may be given instead of a
  // file ("a preset (25gbe, 100gbe, 400gbe)"). InputError when the file
  // cannot be read, is not a JSON object, or has a key not accepted.
  JsonSpecFile(std::string what, std::string path, std::vector<std::string> keys, const std::string& hint);

  // The number at `key` in [lo, hi] ((lo, hi] when lo_open); `fallback`
  // when the key is absent and not required. InputError otherwise.
  double number(const char* key, bool required, double fallback, double lo, double hi, bool lo_open = false) const;
  // As number(), and a whole number.
  long long whole(const char* key, bool required, long long fallback, long long lo, long long hi) const;
  // The string at `key`, or `fallback` when it is absent.
  std::string text(const char* key, std::string fallback) const;
  const std::string& path() const { return path_; }

 private:
  std::string what_, path_;
  nlohmann::json json_;
};

}  // namespace gpemu

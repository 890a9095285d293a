// The torch runtime attached to `gpemu serve` (Settings::serve): each device
// is a client of the server's GPU of the same index, connected on first use.
#include "torch/runtime.h"

#include <fmt/format.h>

#include "share/serve.h"
#include "torch/settings.h"

namespace gpemu::torch_backend {

using detail::client_name;

Runtime::Remote& Runtime::remote_of(int device_index) {
  check_device(device_index);
  return *remote_[static_cast<std::size_t>(device_index)];
}

ServeClient& Runtime::attached(Remote& r, int device_index) {
  if (!r.client)
    r.client = std::make_unique<ServeClient>(*settings_.serve, ClientHello{client_name(settings_), device_index,
                                                                           settings_.priority, settings_.mig});
  return *r.client;
}

nlohmann::json Runtime::call(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  return attached(r, device_index).call(message);
}

void Runtime::post(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  attached(r, device_index).post(message);
}

// Attached, the memory queries of a GPU the process has not used answer
// without connecting (as CUDA's do not create a context).
std::optional<nlohmann::json> Runtime::call_if_attached(int device_index, nlohmann::json message) {
  Remote& r = remote_of(device_index);
  std::lock_guard lock(r.mutex);
  if (!r.client) return std::nullopt;
  return r.client->call(message);
}

}  // namespace gpemu::torch_backend

// A session's clients (session.h, ClientSpec, Session::attach): processes
// driven from outside, op by op, that are jobs of the session. Their slots
// (placement, load, end) are session.cpp's; their Devices are here.
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "gpemu/error.h"
#include "gpemu/session.h"

namespace gpemu {

ClientHandle Session::attach(ClientSpec client) {
  const JobId id = add_client(client);
  std::vector<int> placed = outcome(id).gpus;
  std::vector<std::unique_ptr<Device>> devices;
  try {
    for (const int g : placed) {
      DeviceOptions d;
      d.index = g;
      if (!spec_.exclusive) d.share = ShareContext{&gpu(g), client.priority, client.mig};
      devices.push_back(std::make_unique<Device>(*timeline_, *spec_.gpu, d));
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    // No room for its context, no slice: a process that never started.
    devices.clear();
    end_client(id, std::current_exception());
    throw;
  }
  ClientHandle h;
  h.session_ = this;
  h.id_ = id;
  h.gpus_ = std::move(placed);
  h.devices_ = std::move(devices);
  return h;
}

ClientHandle::ClientHandle(ClientHandle&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      id_(std::exchange(other.id_, -1)),
      gpus_(std::move(other.gpus_)),
      devices_(std::move(other.devices_)) {}

ClientHandle& ClientHandle::operator=(ClientHandle&& other) noexcept {
  if (this == &other) return *this;
  try {
    detach();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an observer's error; this one has ended all the same
  }
  session_ = std::exchange(other.session_, nullptr);
  id_ = std::exchange(other.id_, -1);
  gpus_ = std::move(other.gpus_);
  devices_ = std::move(other.devices_);
  return *this;
}

ClientHandle::~ClientHandle() {
  try {
    detach();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an observer's error; the client has ended all the same
  }
}

int ClientHandle::gpu(int rank) const {
  if (rank < 0 || rank >= gpus())
    throw InputError(fmt::format("client {}: rank {}: it has {} GPU(s)", id_, rank, gpus()));
  return gpus_[static_cast<std::size_t>(rank)];
}

Device& ClientHandle::device(int rank) {
  if (!session_) throw std::logic_error("ClientHandle::device: the client is not attached");
  gpu(rank);  // in range
  return *devices_[static_cast<std::size_t>(rank)];
}

void ClientHandle::detach() {
  Session* session = std::exchange(session_, nullptr);
  if (!session) return;
  devices_.clear();  // the process exits: its contexts and memory go back
  session->end_client(id_, nullptr);
}

}  // namespace gpemu

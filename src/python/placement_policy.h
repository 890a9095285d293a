// gpemu.PlacementPolicy: a placement policy (session.h) written in Python.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpemu/session.h"
#include "python/module.h"

namespace gpemu::python {

// The C++ interface whose place / place_gpus a Python subclass overrides,
// given the queued job (a read-only gpemu.PlacementRequest) and the GPUs (a
// list of read-only gpemu.GpuLoad). The session asks it from its host
// threads with the GIL released: each call takes the GIL; what an override
// raises, or a GPU it returns that is not one, is an Error naming the policy
// and the method (an InputError for a ValueError), which ends the run.
// name() is read once (adopt), so that the registry, which asks names
// under its lock from any thread, never waits for the GIL.
class PyPlacementPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return name_; }
  int place(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override;
  std::vector<int> place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override;

  // The C++ policy of `policy`, a gpemu.PlacementPolicy (InputError naming
  // `who` otherwise, or when its name() is not a non-empty str), its name
  // read. The Python object must outlive what is returned (the caller keeps it).
  static std::shared_ptr<const PlacementPolicy> adopt(const py::object& policy, const char* who);
  // Adds `policy` (a gpemu.PlacementPolicy) to the registry under its name()
  // for the process's life, and keeps the Python object alive as long.
  static void add(const py::object& policy);

 private:
  std::string name_;         // set once, by adopt()
  bool registered_ = false;  // by add()
};

}  // namespace gpemu::python

// Placement "pinned": a job starts at its arrival on the GPU it names (GPU 0
// when it names none; a job of N GPUs on the N from there), beside whatever
// runs there; the GPU's sharing policy divides it. `gpemu share` runs its
// jobs so, and `gpemu train` its one job.
#include "workload/placement/policies.h"

namespace gpemu {
namespace {

class Pinned final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "pinned"; }
  int place(const PlacementRequest& job, std::span<const GpuLoad>) const override { return job.gpu >= 0 ? job.gpu : 0; }
  // A job of several GPUs: the ones from the GPU it names on (the session
  // checked they are of one node); of several nodes, as many from the same
  // position of each node from the named GPU's on; a preempted job, its own.
  std::vector<int> place_gpus(const PlacementRequest& job, std::span<const GpuLoad> gpus) const override {
    if (!job.want.empty()) return job.want;
    const int first = place(job, gpus), per = job.gpus / job.nodes;
    std::vector<int> out;
    if (job.nodes == 1) {
      for (int g = first; static_cast<int>(out.size()) < job.gpus; ++g) out.push_back(g);
      return out;
    }
    const int node = gpus[static_cast<std::size_t>(first)].node;
    int count = 0;  // GPUs a node has
    for (const GpuLoad& g : gpus) count += g.node == node ? 1 : 0;
    for (int n = 0; n < job.nodes; ++n)
      for (int k = 0; k < per; ++k) out.push_back(first + n * count + k);
    return out;
  }
};

}  // namespace

std::shared_ptr<const PlacementPolicy> make_pinned_placement() { return std::make_shared<Pinned>(); }

}  // namespace gpemu

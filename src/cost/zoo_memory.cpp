// Replaying the model zoo's tensor lifetimes through the caching allocator
// (include/gpemu/zoo_memory.h, docs/zoo-memory.md).
#include "gpemu/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "cost/plan_executor.h"
#include "gpemu/device.h"
#include "gpemu/error.h"

namespace gpemu::zoo {
namespace {

// Where an event sits in an iteration: ops are -1 (start) .. n (end).
struct Buckets {
  explicit Buckets(int n_ops) : allocs(n_ops + 2), frees(n_ops + 2) {}
  std::vector<std::vector<int>> allocs, frees;  // indexed by op + 1
  void alloc(int op, int slot) { allocs[op + 1].push_back(slot); }
  void free(int op, int slot) { frees[op + 1].push_back(slot); }
};

Phase phase_of(const std::vector<OpCost>& ops, int op) {
  if (op < 0) return Phase::Forward;
  if (op >= static_cast<int>(ops.size())) return Phase::Optimizer;
  return ops[op].phase;
}

std::vector<MemoryEvent> flatten(const Buckets& b, const std::vector<OpCost>& ops) {
  std::vector<MemoryEvent> out;
  for (std::size_t i = 0; i < b.allocs.size(); ++i) {
    const int op = static_cast<int>(i) - 1;
    const Phase ph = phase_of(ops, op);
    for (int s : b.allocs[i]) out.push_back(MemoryEvent{s, true, op, ph});
    for (int s : b.frees[i]) out.push_back(MemoryEvent{s, false, op, ph});
  }
  return out;
}

}  // namespace

ZooMemoryPlan zoo_memory_plan(const ModelGraph& model, Shape shape, const ReplayOptions& options) {
  const std::vector<TensorLife> tensors = model.tensors(shape, options.precision, options.optimizer);
  const std::vector<OpCost> ops = model.ops(shape, options.precision, options.optimizer);
  const std::vector<int> first_use = model.first_use(options.precision, options.optimizer);
  const std::vector<int> last_use = model.last_use(options.precision, options.optimizer);
  // A forward result that outlives the forward and that no later op reads is
  // held only by the script (the model's output): without keep_output it dies
  // at its last forward use.
  const auto script_held = [&](const TensorLife& t, int i) {
    const int u = last_use[i];
    return !options.keep_output && t.role == Role::Act && t.alloc >= 0 && ops[t.alloc].phase == Phase::Forward &&
           (t.free < 0 || ops[t.free].phase != Phase::Forward) && u >= 0 && ops[u].phase == Phase::Forward;
  };
  const int n = static_cast<int>(ops.size());
  const int end = n;  // the iteration's end

  ZooMemoryPlan plan;
  plan.op_count = n;
  plan.slot_bytes.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    plan.slot_bytes.push_back(tensors[i].bytes);
    plan.slot_tensor.push_back(static_cast<int>(i));
  }
  Buckets first(n), steady(n);

  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    const TensorLife& t = tensors[i];
    if (t.role == Role::Input) plan.input_bytes += t.bytes;
    if (t.bytes == 0) continue;  // PyTorch allocates nothing for an empty storage
    if (options.legacy_inplace_hardtanh && t.role == Role::Act && t.alloc >= 0 && t.alloc + 1 < n &&
        ops[t.alloc].kind == "clone" && ops[t.alloc + 1].kind == "hardtanh_")
      continue;  // autograd's copy of hardtanh_'s input (PyTorch >= 1.10 only)

    if (t.alloc < 0) {
      if (t.role == Role::Input || t.free >= 0) {
        // The batch, or a tensor made before the iteration and dropped in it:
        // each iteration brings its own.
        const int f = t.free >= 0 ? t.free : end;
        for (Buckets* b : {&first, &steady}) {
          b->alloc(-1, i);
          b->free(f, i);
        }
      } else if (t.role == Role::State && first_use[i] >= 0 && ops[first_use[i]].phase == Phase::Optimizer) {
        first.alloc(first_use[i], i);  // created lazily by the first step, then kept
      } else {
        plan.persistent.push_back(i);
      }
      continue;
    }
    if (t.role == Role::Grad && t.free < 0) {
      if (options.keep_grads) {
        // Iteration 0: the backward op's output becomes .grad and stays.
        // Later: it is a temporary added into the kept .grad.
        first.alloc(t.alloc, i);
        const int temp = static_cast<int>(plan.slot_bytes.size());
        plan.slot_bytes.push_back(t.bytes);
        plan.slot_tensor.push_back(i);
        steady.alloc(t.alloc, temp);
        steady.free(t.alloc, temp);
      } else {
        for (Buckets* b : {&first, &steady}) {
          b->alloc(t.alloc, i);
          b->free(end, i);
        }
      }
      continue;
    }
    const int f = script_held(t, i) ? last_use[i] : t.free >= 0 ? t.free : end;
    for (Buckets* b : {&first, &steady}) {
      b->alloc(t.alloc, i);
      b->free(f, i);
    }
  }
  plan.first_iteration = flatten(first, ops);
  plan.steady_iteration = flatten(steady, ops);
  return plan;
}

void allocate_persistent(CachingAllocator& alloc, const ZooMemoryPlan& plan, PlanSlots& slots,
                         const std::function<void()>& allocated) {
  if (slots.size() < plan.slot_bytes.size()) slots.resize(plan.slot_bytes.size());
  for (int s : plan.persistent) {
    auto& slot = slots[static_cast<std::size_t>(s)];
    if (slot) continue;
    slot = alloc.allocate(plan.slot_bytes[static_cast<std::size_t>(s)]);
    if (allocated) allocated();
  }
}

void apply_events(CachingAllocator& alloc, const ZooMemoryPlan& plan, const std::vector<MemoryEvent>& events,
                  PlanSlots& slots, const PlanHooks& hooks) {
  if (slots.size() < plan.slot_bytes.size()) slots.resize(plan.slot_bytes.size());
  for (const MemoryEvent& e : events) {
    if (hooks.take && !hooks.take(e)) continue;
    if (hooks.applying) hooks.applying(e);
    auto& slot = slots[static_cast<std::size_t>(e.slot)];
    if (e.alloc) {
      if (slot) continue;
      slot = alloc.allocate(plan.slot_bytes[static_cast<std::size_t>(e.slot)]);
      if (hooks.allocated) hooks.allocated();
    } else if (slot) {
      alloc.free(slot);
      slot = 0;
    }
  }
}

MemoryReplay replay_memory(const ModelGraph& model, Shape shape, std::uint64_t capacity_bytes,
                           const ReplayOptions& options) {
  if (options.iterations < 1)
    throw InputError(fmt::format("{} replayed iterations is impossible: at least 1 is needed", options.iterations));
  if (options.until_steady && options.max_iterations < 1)
    throw InputError(fmt::format("max_iterations {} is impossible: at least 1 is needed", options.max_iterations));
  MemoryReplay r;
  r.capacity_bytes = capacity_bytes;
  r.shape = model.resolve(shape);
  const ZooMemoryPlan plan = zoo_memory_plan(model, r.shape, options);
  r.input_bytes = plan.input_bytes;

  CachingAllocator::Options ao;
  ao.capacity_bytes = capacity_bytes;
  ao.max_split_size_bytes = options.max_split_size_bytes;
  CachingAllocator alloc(ao);
  PlanSlots slots;
  std::uint64_t best = 0;
  int iteration = -1;
  const MemoryEvent* current = nullptr;

  const auto allocated = [&] {
    const std::uint64_t now = alloc.stats().allocated_bytes;
    if (now > best) {
      best = now;
      r.peak_iteration = iteration;
      r.peak_op = current ? current->op : -1;
      r.peak_phase = current ? current->phase : Phase::Forward;
    }
  };
  const int most = options.until_steady ? std::max(options.iterations, options.max_iterations) : options.iterations;
  try {
    allocate_persistent(alloc, plan, slots, allocated);
    if (options.warm_start) {
      // What the first iteration creates and keeps (grads, optimizer state),
      // made before this batch's first iteration, back to back.
      std::vector<int> balance(plan.slot_bytes.size(), 0);
      for (const MemoryEvent& e : plan.first_iteration) balance[e.slot] += e.alloc ? 1 : -1;
      apply_events(alloc, plan, plan.first_iteration, slots,
                   {.take = [&](const MemoryEvent& e) { return e.alloc && balance[e.slot] > 0; },
                    .allocated = allocated});
    }
    const PlanHooks iteration_hooks{.applying = [&](const MemoryEvent& e) { current = &e; }, .allocated = allocated};
    for (iteration = 0; iteration < most; ++iteration) {
      const bool first = iteration == 0 && !options.warm_start;
      const auto& events = first ? plan.first_iteration : plan.steady_iteration;
      const AllocatorStats before = alloc.stats();
      apply_events(alloc, plan, events, slots, iteration_hooks);
      current = nullptr;
      r.iterations_replayed = iteration + 1;
      if (!options.until_steady || iteration + 1 < options.iterations || first) continue;
      // A steady iteration that reserved and released no segment left the
      // allocator as it found it (same segments, same live blocks): every
      // later iteration repeats it.
      const AllocatorStats after = alloc.stats();
      if (after.num_device_alloc == before.num_device_alloc && after.num_device_free == before.num_device_free) break;
    }
  } catch (const OutOfMemoryError& e) {
    r.fits = false;
    r.oom_message = e.what();
    r.oom_iteration = iteration;
    r.oom_op = current ? current->op : -1;
    r.oom_phase = current ? current->phase : Phase::Forward;
  }
  const AllocatorStats s = alloc.stats();
  r.peak_allocated_bytes = s.peak_allocated_bytes;
  r.peak_reserved_bytes = s.peak_reserved_bytes;
  r.persistent_bytes = r.fits ? s.allocated_bytes : 0;
  return r;
}

std::int64_t max_batch(std::uint64_t capacity_bytes, const ModelGraph& model, Shape shape, const ReplayOptions& options,
                       std::int64_t limit) {
  if (limit < 1) return 0;
  auto fits = [&](std::int64_t b) {
    return replay_memory(model, Shape{b, shape.seq_len}, capacity_bytes, options).fits;
  };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = 0;  // lo fits; hi (when > 0) does not
  for (std::int64_t b = 2;; b *= 2) {
    if (b >= limit) {
      if (fits(limit)) return limit;
      hi = limit;
      break;
    }
    if (!fits(b)) {
      hi = b;
      break;
    }
    lo = b;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

// ---- will a batch fit on a real card? ----------------------------------------

std::uint64_t oom_capacity(const GpuSpec& gpu, double margin) {
  return Device::tensor_capacity(gpu, Device::default_context_reserve(gpu), margin);
}

ReplayOptions oom_replay_options(ReplayOptions options) {
  options.until_steady = true;
  return options;
}

// ---- cost-model integration ------------------------------------------------

bool apply_zoo_memory(StepCost& cost, std::string_view model, int batch_size, const ReplayOptions& options,
                      std::int64_t seq_len) {
  if (cost.memory_provenance == Provenance::Measured || cost.memory_provenance == Provenance::Interpolated)
    return false;
  const ModelGraph* g = find_model(model);
  if (!g) return false;
  if (batch_size < 1) throw InputError(fmt::format("batch size {} is impossible: it must be at least 1", batch_size));
  const MemoryReplay r = replay_memory(*g, Shape{batch_size, seq_len}, CachingAllocator::kUnlimited, options);
  cost.persistent_bytes = r.persistent_bytes;
  cost.peak_bytes = r.peak_allocated_bytes;
  cost.peak_reserved_bytes = r.peak_reserved_bytes;
  cost.input_bytes_per_sample = g->input_bytes_per_sample(r.shape.seq_len);
  cost.memory_provenance = Provenance::Estimated;
  std::string sentence =
      fmt::format("memory: model-zoo tensor replay ({}, {}{})", to_string(options.precision),
                  to_string(options.optimizer), g->has_seq_len() ? fmt::format(", seq_len {}", r.shape.seq_len) : "");
  // Applying again (other options) replaces the earlier sentence.
  constexpr std::string_view kLead = "memory: model-zoo tensor replay (";
  if (auto at = cost.note.find(kLead); at != std::string::npos) {
    auto close = cost.note.find(')', at);
    close = close == std::string::npos ? cost.note.size() : close + 1;
    std::size_t begin = at;
    if (begin >= 2 && cost.note.compare(begin - 2, 2, "; ") == 0) begin -= 2;
    cost.note.erase(begin, close - begin);
  }
  cost.note = cost.note.empty() ? sentence : cost.note + "; " + sentence;
  return true;
}

namespace {

class ZooMemoryCostModel : public CostModel {
 public:
  ZooMemoryCostModel(std::unique_ptr<CostModel> inner, ReplayOptions options)
      : inner_(std::move(inner)), options_(options) {}
  StepCost step_cost(const GpuSpec& gpu, std::string_view model, int batch_size) const override {
    StepCost c = inner_->step_cost(gpu, model, batch_size);
    apply_zoo_memory(c, model, batch_size, options_);
    return c;
  }
  std::vector<std::string> models() const override { return inner_->models(); }
  std::string describe() const override {
    return inner_->describe() + "; memory from the model zoo's tensor lifetimes where the zoo has the model";
  }

 private:
  std::unique_ptr<CostModel> inner_;
  ReplayOptions options_;
};

}  // namespace

std::unique_ptr<CostModel> with_zoo_memory(std::unique_ptr<CostModel> inner, ReplayOptions options) {
  if (!inner) throw std::invalid_argument("with_zoo_memory: no inner cost model");
  return std::make_unique<ZooMemoryCostModel>(std::move(inner), options);
}

}  // namespace gpemu::zoo

// The FFCV-style loader's modelled costs (virtual clock) and how a dataset
// that is an FFCV-style file picks that loader (pipeline.h, "FFCV-style loader").
#include <fmt/format.h>

#include "gpemu/pipeline.h"

namespace gpemu::pipeline {
namespace {

// Per-batch stages after FFCV's JIT-compiled decode, medians of GPEmu's
// measurements at batch 256 (../shared/reference/published/repro/
// ffcv_stage_costs.csv, from mengwanguc/gpemu:rep/ffcv/preprocess-shape-time/
// batch256-cached-gpu/{todevice,totorchimage,convert,normalize}-time.txt):
// ToDevice 0.1345 ms, ToTorchImage 0.0277 ms, Convert 0.0765 ms,
// NormalizeImage 3.8244 ms. The CPU variant (batch256-no-cached-cpu, the
// stages run on the CPU as GPEmu's emulator ran them): 1.107, 0.0246,
// 12.3749 and 23.1018 ms.
constexpr double kGpuStagesMsPer256 = 0.1345 + 0.0277 + 0.0765 + 3.8244;
constexpr double kCpuStagesMsPer256 = 1.107 + 0.0246 + 12.3749 + 23.1018;

}  // namespace

LoaderModelOptions ffcv_loader_model(LoaderModelOptions m, std::size_t batch_size, bool stages_on_cpu) {
  // The pipeline reads records straight from the mapped pages: no syscall per sample.
  m.read_per_sample = 0;
  const double ms = (stages_on_cpu ? kCpuStagesMsPer256 : kGpuStagesMsPer256) * static_cast<double>(batch_size) / 256.0;
  m.collate_per_batch = static_cast<Duration>(ms * 1e6 + 0.5);
  return m;
}

void use_ffcv_loader(const Dataset& dataset, std::size_t batch_size, LoaderOptions& options,
                     LoaderModelOptions* model) {
  if (dataset.page_size == 0) return;
  if (options.read_method == ReadMethod::Pread) options.read_method = ReadMethod::Mmap;
  if (model) *model = ffcv_loader_model(*model, batch_size, false);
}

}  // namespace gpemu::pipeline

#include <iostream>

#include "cli/commands.h"
#include "cluster_bench.h"
#include "crossval_bench.h"
#include "datastall_bench.h"
#include "density_bench.h"
#include "host_bench.h"
#include "loader_bench.h"
#include "overhead_bench.h"
#include "prep_bench.h"
#include "scale_bench.h"
#include "share_bench.h"
#include "timing_bench.h"
#include "torch_bench.h"
#include "virtual_bench.h"

namespace gpemu::cli {
namespace {

// Runs a benchmark and prints its table, or its JSON with --json.
template <class Options, class Run, class Print>
void add_bench(CLI::App& parent, const char* name, const char* what, Run run, Print print,
               std::function<void(CLI::App&, Options&)> extra = {}) {
  struct Args {
    bool json = false, quick = false;
    Options options;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand(name, what);
  cmd->add_flag("--json", a->json, "Machine-readable output");
  if constexpr (requires { Options::quick(); })
    cmd->add_flag("--quick", a->quick, "A shorter run with fewer operations");
  if (extra) extra(*cmd, a->options);
  cmd->callback([a, run, print] {
    Options o = a->options;
    if constexpr (requires { Options::quick(); })
      if (a->quick) {
        o = Options::quick();
        // What the flags name (input files) survives --quick.
        if constexpr (requires { o.keep_inputs(a->options); }) o.keep_inputs(a->options);
      }
    const nlohmann::json result = run(o);
    if (a->json)
      std::cout << result.dump(2) << '\n';
    else
      print(result, std::cout);
  });
}

}  // namespace

namespace {

// The emulator itself: its clocks, device density, this host, the data loader.
void add_emulator_benches(CLI::App* cmd) {
  add_bench<TimingBenchOptions>(
      *cmd, "timing", "Real-clock fidelity: drift and lateness of 10,000 synchronized kernels vs relative sleeps",
      [](const TimingBenchOptions& o) { return run_timing_bench(o); }, print_timing_bench,
      [](CLI::App& c, TimingBenchOptions& o) {
        c.add_option("--ops", o.ops, "Kernels per chain")->capture_default_str();
        c.add_option_function<double>(
            "--spin-window-us", [&o](double us) { o.spin_window = from_us(us); },
            "Real clock: spin this long before each deadline instead of sleeping (default 100)");
      });
  add_bench<VirtualBenchOptions>(
      *cmd, "virtual", "Virtual-clock throughput: emulated operations per second on one core",
      [](const VirtualBenchOptions& o) { return run_virtual_bench(o); }, print_virtual_bench,
      [](CLI::App& c, VirtualBenchOptions& o) {
        c.add_option("--ops", o.ops, "Operations per variant")->capture_default_str();
      });
  add_bench<DensityBenchOptions>(
      *cmd, "density", "Memory per emulated device with 1,000 emulated GPUs in one process",
      [](const DensityBenchOptions& o) { return run_density_bench(o); }, print_density_bench,
      [](CLI::App& c, DensityBenchOptions& o) {
        c.add_option("--devices", o.devices, "Emulated GPUs")->capture_default_str();
      });
  add_bench<HostBenchOptions>(
      *cmd, "host", "This host's dispatch cost per op of the installed PyTorch (CPU only), as a host profile",
      [](const HostBenchOptions& o) { return run_host_bench(o); }, print_host_bench,
      [](CLI::App& c, HostBenchOptions& o) {
        c.add_option("--out", o.out, "Write the host profile here (for --host FILE)");
        c.add_option("--name", o.name, "The profile's name (default: this-host)");
        c.add_option("--python", o.python, "Python interpreter with torch")->capture_default_str();
        c.add_option("--script", o.script, "The measurement script (default: bench/host_bench.py)");
        c.add_option("--cuda-launch-us", o.cuda_launch_us,
                     "What a CUDA kernel launch adds on the host beyond the CPU dispatch (not measurable here)")
            ->capture_default_str();
      });
  add_bench<LoaderBenchOptions>(
      *cmd, "loader",
      "Data loader throughput: gpemu's loader, its FFCV-style and GPU-decode (DALI-style) loaders and gpemu prep "
      "serve vs torchvision ImageFolder + DataLoader",
      [](const LoaderBenchOptions& o) { return run_loader_bench(o); }, print_loader_bench,
      [](CLI::App& c, LoaderBenchOptions& o) {
        c.add_option("--workers", o.workers, "Loader workers for both")->capture_default_str();
        c.add_option("--images", o.images, "Images in the generated dataset")->capture_default_str();
        c.add_option("--dataset-dir", o.dataset_dir,
                     "Folder of the generated dataset (default: <temp>/gpemu-loader-bench-<images>-<seed>; reused "
                     "when it matches)");
        c.add_option("--epochs", o.epochs, "Timed epochs per loader")->capture_default_str();
        c.add_flag_function(
            "--io-uring", [&o](std::int64_t) { o.read_method = pipeline::ReadMethod::IoUring; },
            "gpemu's workers read each batch with io_uring (all of its reads at once) instead of pread");
        c.add_flag("--cold", o.cold,
                   "Evict the dataset from the page cache before each epoch (and before torch's run)");
        c.add_flag_function(
            "--bytes-only", [&o](std::int64_t) { o.decode = false; },
            "Deliver the JPEG bytes without decoding (an I/O-only loader; torch is not run)");
        c.add_flag_function(
            "--no-torch", [&o](std::int64_t) { o.run_torch = false; }, "Do not run torch's loader");
        c.add_flag_function(
            "--no-ffcv", [&o](std::int64_t) { o.run_ffcv = false; },
            "Do not run gpemu's FFCV-style loader (over the same images written once into an FFCV-style file)");
        c.add_option("--service-workers", o.service_workers,
                     "Worker processes of gpemu prep serve (one CPU each, offload all) over the same images; 0 to "
                     "skip it")
            ->capture_default_str();
        c.add_option("--gpu-decode", o.gpu_decode,
                     "Card whose GPU decode (DALI-style) the GPU-decode loader models (its host part runs here); "
                     "'' to skip it")
            ->capture_default_str();
      });
}

// The preprocessing service (`gpemu prep serve`) against its model.
void add_prep_bench(CLI::App* cmd) {
  add_bench<PrepBenchOptions>(
      *cmd, "prep",
      "Preprocessing service, real against modelled: gpemu prep serve's worker processes and the modelled service "
      "with the same workers, CPUs and offload, over the same JPEGs",
      [](const PrepBenchOptions& o) { return run_prep_bench(o); }, print_prep_bench,
      [](CLI::App& c, PrepBenchOptions& o) {
        c.add_option("--workers", o.workers, "Service workers")->capture_default_str();
        c.add_option("--worker-cpus", o.worker_cpus, "CPUs of each worker")->capture_default_str();
        c.add_option("--offload", o.offload, "What the workers run: read, decode or all")->capture_default_str();
        c.add_option("--local-workers", o.local_workers, "The client's threads (read, decode)")->capture_default_str();
        c.add_option("--images", o.images, "Images in the generated dataset")->capture_default_str();
        c.add_option("--batch-size", o.batch_size, "Batch size")->capture_default_str();
        c.add_option("--image-size", o.image_size, "Output images, N x N")->capture_default_str();
        c.add_option("--epochs", o.epochs, "Timed epochs (after one to warm)")->capture_default_str();
        c.add_option("--network", o.network, "The modelled network (a preset or JSON file)")->capture_default_str();
        c.add_option("--dataset-dir", o.dataset_dir,
                     "Folder of the generated dataset (default: <temp>/gpemu-prep-bench-<images>-<seed>)");
      });
}

// The cost model and the engine at scale: overhead, cross-validation, many GPUs.
void add_model_benches(CLI::App* cmd) {
  add_bench<OverheadBenchOptions>(
      *cmd, "overhead", "Emulation overhead: accelerator utilization of 100 us emulated steps fed from memory",
      [](const OverheadBenchOptions& o) { return run_overhead_bench(o); }, print_overhead_bench,
      [](CLI::App& c, OverheadBenchOptions& o) {
        c.add_option("--steps", o.steps, "Measured steps")->capture_default_str();
      });
  add_bench<CrossvalBenchOptions>(
      *cmd, "crossval",
      "Analytical cost model: leave-one-GPU-out and leave-models-out errors on measured profiles and published step "
      "times",
      [](const CrossvalBenchOptions& o) { return run_crossval_bench(o); }, print_crossval_bench,
      [](CLI::App& c, CrossvalBenchOptions& o) {
        c.add_option("--profiles", o.profiles, "Measured profiles (default: ../shared/reference/gpemu-profiles)");
        c.add_option("--step-times", o.step_times,
                     "Published step times (default: ../shared/reference/published/gpu_training_step_times.csv)");
        c.add_option("--folds", o.model_folds, "Folds over the models")->capture_default_str();
        c.add_option("--measured-steps", o.measured_steps,
                     "gpemu's measured steps of an unprofiled family (default: the H200 rows in ../shared), its "
                     "family and host fitted with each row and model family left out");
        c.add_option("--per-model", o.per_model_gpu,
                     "Also each model's signed errors on this measured GPU (in-sample and with its family left out) "
                     "and its measured backward/forward ratio beside the other GPUs'");
        c.add_option("--robust-scale", o.robust_scale,
                     "Pseudo-Huber scale of the calibration's log errors (0: least squares)")
            ->capture_default_str();
      });
  add_bench<ScaleBenchOptions>(
      *cmd, "scale",
      "Wall time per emulated DDP training step of 8 to 1,024 GPUs under the virtual clock, and memory per GPU",
      [](const ScaleBenchOptions& o) { return run_scale_bench(o); }, print_scale_bench,
      [](CLI::App& c, ScaleBenchOptions& o) {
        c.add_option("--gpus", o.gpus, "Job sizes, GPUs (8 per node)")->capture_default_str();
        c.add_option("--steps", o.steps, "Iterations per GPU in each job")->capture_default_str();
        c.add_option("--warmup", o.warmup, "Of them, iterations left out of the steady rate")->capture_default_str();
        c.add_option("--gpu", o.gpu, "GPU to emulate")->capture_default_str();
        c.add_option("--model", o.model, "Model")->capture_default_str();
        c.add_option("--batch-size,-b", o.batch_size, "Batch size per GPU")->capture_default_str();
        c.add_option("--network", o.network, "10gbe, 25gbe, 100gbe, 400gbe or a JSON file")->capture_default_str();
        c.add_option("--sync", o.sync, "Host waits every 'iteration' (loss.item()) or at the 'end'")
            ->capture_default_str();
        c.add_option("--epoch-nodes", o.epoch_nodes,
                     "Then one imagenette10g epoch of this many nodes of 8 GPUs with a partitioned cache (0: none)")
            ->capture_default_str();
        c.add_option("--epoch-batch-size", o.epoch_batch_size, "That epoch's batch size per GPU")
            ->capture_default_str();
      });
}

// The front ends: gpemu torch, the cluster, sharing, serve, the DataStall figures.
void add_front_end_benches(CLI::App* cmd) {
  add_bench<TorchBenchOptions>(
      *cmd, "torch",
      "gpemu torch: resnet50 on emulated V100 and H100 under both clocks, against predict, and the emulator's "
      "cost per op",
      [](const TorchBenchOptions& o) { return run_torch_bench(o); }, print_torch_bench,
      [](CLI::App& c, TorchBenchOptions& o) {
        c.add_option("--iters", o.iters, "Measured iterations per run")
            ->check(CLI::Range(1, 1000))
            ->capture_default_str();
        c.add_option("--warmup", o.warmup, "Iterations before them")->check(CLI::Range(0, 1000))->capture_default_str();
      });
  add_bench<ClusterBenchOptions>(
      *cmd, "cluster", "Cluster simulation cost: jobs per wall second and peak memory at 1k, 10k and 100k jobs (LAS)",
      [](const ClusterBenchOptions& o) { return run_cluster_bench(o); }, print_cluster_bench,
      [](CLI::App& c, ClusterBenchOptions& o) {
        c.add_option("--seed", o.seed, "Trace seed")->capture_default_str();
        c.add_option("--load-factor", o.load_factor, "Offered GPU-hours per hour over the GPUs")->capture_default_str();
      });
  add_bench<ShareBenchOptions>(
      *cmd, "share",
      "Jobs sharing one emulated GPU: MPS interference ratios, the policies side by side, emulation cost per step",
      [](const ShareBenchOptions& o) { return run_share_bench(o); }, print_share_bench,
      [](CLI::App& c, ShareBenchOptions& o) {
        c.add_option("--gpu", o.gpu, "GPU to emulate")->capture_default_str();
        c.add_option("--steps", o.steps, "Iterations per job")->capture_default_str();
        c.add_option("--jobs", o.jobs, "Emulation cost: jobs on one GPU")->capture_default_str();
        c.add_option("--compute-model", o.compute_model, "The compute-bound job's model")->capture_default_str();
        c.add_option("--compute-batch", o.compute_batch, "Its batch size")->capture_default_str();
        c.add_option("--memory-model", o.memory_model, "The memory-bound job's model")->capture_default_str();
        c.add_option("--memory-batch", o.memory_batch, "Its batch size")->capture_default_str();
      });
  add_bench<ServeBenchOptions>(
      *cmd, "serve",
      "gpemu serve's request round trips (per op, per batch) and 64 clients at once on one GPU, real clock",
      [](const ServeBenchOptions& o) { return run_serve_bench(o); }, print_serve_bench,
      [](CLI::App& c, ServeBenchOptions& o) {
        c.add_option("--clients", o.clients, "Clients at once")->capture_default_str();
        c.add_option("--batches", o.client_batches, "Batch requests per client")->capture_default_str();
      });
  add_bench<DatastallBenchOptions>(
      *cmd, "datastall", "DataStall-style fetch/prep stall shares of five models on 8 emulated V100s vs the paper",
      [](const DatastallBenchOptions& o) { return run_datastall_bench(o); }, print_datastall_bench,
      [](CLI::App& c, DatastallBenchOptions& o) {
        c.add_option("--cores", o.cores,
                     "CPU cores the loaders share (default: this machine's; the paper's server: 24)");
        c.add_option("--batches", o.batches, "Batches per GPU per epoch")->capture_default_str();
      });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks of the emulator itself (figures, not pass/fail)");
  cmd->require_subcommand(1);
  add_emulator_benches(cmd);
  add_model_benches(cmd);
  add_prep_bench(cmd);
  add_front_end_benches(cmd);
}

}  // namespace gpemu::cli

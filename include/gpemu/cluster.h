// A GPU cluster in virtual time: many training jobs, many emulated GPUs, a scheduling policy.
//
// Sections: cluster and trace files, job speed, policies, simulation.
//
//   cluster file + trace file --> simulate(cluster, trace, policy, options) --> ClusterRun
//   a job's iteration time under an allocation (GPU model, GPU count, nodes,
//   CPU cores for its loader) is the engine's figure (job.h), memoised per
//   configuration (JobSpeed)
//
// The simulation is round based, as Synergy's, Gavel's and Blox's simulators
// are: at each round boundary the policy orders the active jobs, the
// placement gives each job in that order its GPUs (consolidated on one node
// when it fits) and the CPU allocation its loader cores; jobs then run at the
// engine's speed until the next round. A job whose GPUs change pays a
// checkpoint write when it is preempted and a read when it resumes. Rounds in
// which nothing can change (no job waits) are skipped. Jobs packed on one GPU
// (or, optionally, a node's jobs) run at the engine's speed for that company
// (JobSpeed::colocated_s). docs/cluster.md.
//
// Thread safety: free functions on values; a JobSpeed is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gpemu/catalog.h"
#include "gpemu/error.h"
#include "gpemu/job.h"
#include "gpemu/report.h"

// ==== cluster and trace files ====

namespace gpemu::cluster {

// One kind of machine, `count` of them.
struct NodeSpec {
  std::string name;              // "node" unless named
  const GpuSpec* gpu = nullptr;  // from the catalog
  int gpus = 8;                  // per node
  int cpus = 24;                 // cores per node
  double dram_gib = 500;         // per node
  int count = 1;
  int rack = 0;
  // The loader's CPU time per image on these cores, besides its entropy
  // decoding (pipeline.h LoaderModelOptions::decode_per_sample); 0: that default.
  double decode_us = 0;
};

struct ClusterConfig {
  std::vector<NodeSpec> nodes;  // kinds of machine, in the file's order
  // Between nodes (a multi-node job's all-reduce): interconnect.h's presets.
  std::string network = "100gbe";
  // Bytes written and read per GPU of a job at a preemption and at a resume
  // (its checkpoint), and the storage's rate for them.
  double checkpoint_gib = 1.0;
  double storage_gb_per_s = 2.0;
  // Seconds a job takes each time it starts or resumes before it iterates
  // (a container's start: AlloX's pods), on the resources it was given.
  double job_start_s = 0;
  int total_gpus() const;
  int total_nodes() const;
};

// JSON: {"nodes": [{"gpu": "v100", "gpus": 8, "cpus": 24, "dram_gib": 500,
// "count": 2, "name": "...", "rack": 0}], "network": "100gbe",
// "checkpoint_gib": 1, "storage_gb_per_s": 2, "job_start_s": 0}. InputError naming the file,
// the node and the key for anything else.
ClusterConfig parse_cluster(std::string_view text, std::string_view source);
ClusterConfig read_cluster_file(const std::string& path);

// One job of a trace.
struct TraceJob {
  std::string id;  // unique
  double arrival_s = 0;
  std::string user = "user0";
  std::string model;  // a zoo model; "" for a fixed step time
  int batch = 64;     // per GPU
  // The program variant as `gpemu predict` takes it, "key=value;..." with
  // the keys precision, matmul_precision, amp, memory_format, attention,
  // fused, cudnn_tf32, foreach, micro_steps; "" for the defaults.
  std::string variant;
  int gpus = 1;
  // How long: iterations, or duration_s (iterations = duration at the job's
  // speed on its GPUs with a GPU-proportional share of the node's cores, as
  // Synergy's trace turns Philly durations into iterations).
  std::int64_t iterations = 0;
  double duration_s = 0;
  double step_s = 0;    // model "": a fixed time per iteration
  std::string dataset;  // a virtual dataset (pipeline.h); "": in-memory batches, no loader
  int cpus = 0;         // asked loader cores; 0: none stated
  double mem_gib = 0;   // asked host memory; 0: none stated
  // A second configuration on CPU cores alone, as AlloX's jobs have: the
  // cores it holds (0: none) and its seconds per iteration there (a step_s
  // job's; gpemu has no model of training on CPU cores). A policy that
  // places jobs on either configuration (drf, allox) may run it there.
  int cpu_config_cpus = 0;
  double cpu_step_s = 0;
  ModelSpec model_spec;  // resolved from model and variant
};

struct Trace {
  std::vector<TraceJob> jobs;  // ordered by arrival, then file order
};

// CSV with a header naming columns among: job, arrival_s, user, model, batch,
// variant, gpus, iterations, duration_s, step_s, dataset, cpus, mem_gib,
// cpu_config_cpus, cpu_step_s
// (job, arrival_s, gpus and one of iterations / duration_s required).
// Errors name the file and line. A job asking more GPUs than one kind of
// node of the cluster offers is named with the fix.
Trace parse_trace(std::string_view text, std::string_view source, const ClusterConfig& cluster);
Trace read_trace_file(const std::string& path, const ClusterConfig& cluster);
std::string trace_csv(const Trace& trace);

// A Philly-derived trace as Synergy's generator defines it
// (msr-fiddle/synergy@1bb2bed simulator/helpers/utils.py and
// simulator/jobs/workload.py; the same duration law as Gavel's
// scheduler/utils.py generate_job): Poisson arrivals of `jobs_per_hour`
// (inter-arrival rounded up to whole seconds), GPUs 1 / 2 / 4 / 8 with
// probability 0.7 / 0.1 / 0.15 / 0.05, a duration of 60 * 10^U(1.5, 3) s
// (80 %) or 60 * 10^U(3, 4) s (20 %) at fair share, a model drawn from
// `models` (image models read `dataset`).
struct TraceOptions {
  std::int64_t jobs = 100;
  std::uint64_t seed = 0;
  double jobs_per_hour = 5;
  int users = 1;
  struct Model {
    std::string name;
    int batch = 64;
    bool reads_dataset = false;  // image models read `dataset` through a loader
  };
  std::vector<Model> models = {{"resnet18", 256, true}, {"resnet50", 128, true},  {"mobilenet_v2", 128, true},
                               {"alexnet", 256, true},  {"bert_base", 32, false}, {"gpt2_small", 8, false}};
  std::string dataset = "imagenet1k";
  bool static_arrivals = false;  // every job at time 0 (Synergy's static traces)
  int max_gpus = 8;              // GPU demands above this are clipped
};
Trace generate_trace(const TraceOptions& options);

}  // namespace gpemu::cluster

// ==== job speed ====

namespace gpemu::cluster {

// The engine's steady-state iteration time of a job under one allocation.
struct Allocation {
  const GpuSpec* gpu = nullptr;
  int gpus = 1;
  int nodes = 1;         // nodes the GPUs are spread over
  int cpus = 0;          // loader cores of the job (0: no loader, batches in memory)
  double decode_us = 0;  // the nodes' NodeSpec::decode_us
};

class JobSpeed {
 public:
  // `network` joins the nodes of a multi-node job (interconnect.h's presets).
  explicit JobSpeed(std::string network = "100gbe") : network_(std::move(network)) {}
  // Seconds per iteration (one step on every GPU): the steady state, plus,
  // with a loader, its restart at each epoch spread over the epoch's steps.
  // A fixed-step job's step_s. Memoised per (model, variant, batch, dataset,
  // allocation).
  double iteration_s(const TraceJob& job, const Allocation& a);
  // The fewest cores (up to max_cpus) at which the job runs within 2 % of its
  // speed at max_cpus: Synergy's "ideal" CPU demand, from the engine.
  int best_cpus(const TraceJob& job, Allocation a, int max_cpus);
  std::size_t configurations() const { return memo_.size(); }
  // The engine's run of the job's first `steps` iterations on the allocation
  // from its start: rank 0's step ends, seconds from the run's start (not
  // memoised). A run with a loader reads the samples of `dataset_steps`
  // steps (the whole dataset at most) as its epoch, epoch after epoch, so
  // runs of one dataset_steps and more steps extend one another. logic_error
  // for a fixed-step job.
  std::vector<double> step_ends(const TraceJob& job, const Allocation& a, std::int64_t steps,
                                std::int64_t dataset_steps);

  // Jobs side by side on one node of `node_gpus` GPUs (session.h): each on
  // GPUs from its `first_gpu` on (jobs with the same first GPU share that GPU
  // under the `sharing` policy, sharing_policy.h: packing), their loaders
  // sharing `node_cpus` cores, their copies the node's PCIe links. Each job's
  // seconds per iteration there: its iteration_s alone times the engine's
  // slowdown of its steady state in that company against alone. nullopt
  // when jobs packed on a GPU do not fit in its memory together (the engine's
  // out-of-memory). Single-node model jobs of one GPU model; memoised per
  // set of configurations.
  struct Placed {
    const TraceJob* job = nullptr;
    Allocation alloc;
    int first_gpu = 0;
  };
  std::optional<std::vector<double>> colocated_s(const std::vector<Placed>& jobs, int node_gpus, int node_cpus,
                                                 std::string_view sharing = "timeslice");
  std::size_t colocations() const { return colocated_memo_.size(); }

 private:
  static double steady_s(const std::vector<double>& ends, std::int64_t steps);
  JobSpec spec_for(const TraceJob& job, const Allocation& a, std::int64_t steps, std::int64_t dataset_steps);
  const CostModel& costs(const TraceJob& job);
  std::vector<std::vector<double>> session_ends(const std::vector<Placed>& jobs, const std::vector<std::int64_t>& steps,
                                                int node_gpus, int node_cpus, std::string_view sharing, bool memory);
  std::map<std::string, std::optional<std::vector<double>>> colocated_memo_;
  std::map<std::string, double> alone_memo_;
  const pipeline::Dataset& dataset(const std::string& name);
  std::map<std::tuple<std::string, int, std::string, std::string, int, int, int>, double> memo_;
  std::map<std::string, std::unique_ptr<CostModel>> costs_;
  std::map<std::string, std::unique_ptr<pipeline::Dataset>> datasets_;
  std::string network_;
};

}  // namespace gpemu::cluster

// ==== policies ====

namespace gpemu::cluster {

// What a policy sees of one active (arrived, unfinished) job.
struct JobState {
  std::size_t index = 0;  // into the trace
  const TraceJob* job = nullptr;
  double arrival_s = 0;
  double attained_gpu_s = 0;  // GPU-seconds run so far (LAS's service)
  double run_s = 0;           // seconds run so far
  double remaining_s = 0;     // remaining iterations at the job's speed on its asked GPUs
  double last_run_end_s = 0;  // when it last ran (its arrival if never)
  bool running = false;       // held GPUs in the last round
  bool packed = false;        // shared a GPU with another job last round
  int queue = 0;              // a multi-level policy's queue (LAS)
  // Jobs with a CPU configuration (TraceJob::cpu_config_cpus): the remaining
  // iterations at its speed there, and whether it ran there last round.
  double remaining_cpu_s = 0;
  bool ran_on_cpu = false;
  // The policy's choice for this round (reset each round): run the job on its
  // CPU configuration, taking its cores from the cluster's pool.
  bool use_cpu = false;
  // The policy's choices for this round (reset each round): the GPU model to
  // run on (an index into ClusterView::gpu_models; -1: any), and to share
  // the GPU of the job at this index of *view.jobs (packing: both of one
  // GPU, that one placed; else this job waits; -1: none).
  int gpu_model = -1;
  int pack_with = -1;
  int ran_on_model = -1;  // the GPU model it held last round (-1: none)
};

// A GPU model of the cluster and its GPUs.
struct GpuModelCount {
  const GpuSpec* gpu = nullptr;
  int gpus = 0;
};

struct ClusterView {
  double now_s = 0;
  double round_s = 0;
  int total_gpus = 0;
  int total_cpus = 0;
  double total_mem_gib = 0;
  std::vector<JobState>* jobs = nullptr;
  std::vector<GpuModelCount> gpu_models;  // in the cluster file's order
  // The engine's figures a policy may ask for (memoised): job i's seconds per
  // iteration on its asked GPUs of model m, consolidated, with a proportional
  // share of the cores (infinity when the model has too few GPUs); and jobs
  // i and j packed on one GPU of the model i would get alone (each one's
  // seconds per iteration; nullopt when they do not fit in its memory).
  std::function<double(std::size_t i, int model)> iteration_s;
  std::function<std::optional<std::pair<double, double>>(std::size_t i, std::size_t j)> packed_s;
};

// What a policy throws to end a run early (a policy written in Python that
// raised): simulate() returns the run so far, its finished jobs' records
// complete, with ClusterRun::stopped saying why.
class PolicyFailure : public Error {
 public:
  using Error::Error;
};

// A scheduling policy orders the active jobs each round; the simulator
// places them in that order (a job that does not fit is skipped and later
// ones may start: backfilling). Blox's and Synergy's policies have this shape.
// Jobs the policy leaves out of the order wait this round. A job marked
// use_cpu runs on its CPU configuration: its cores come from the cluster's
// pool of cores, less those of the jobs placed on GPUs before it (a GPU job
// holds its trace `cpus`, else its GPU-proportional share).
class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Fills `order` with indices into *view.jobs, highest priority first.
  virtual void order(const ClusterView& view, std::vector<std::size_t>& order) = 0;
  // Gandiva's migration: a job whose GPUs one node would hold but for the
  // jobs placed there before it this round moves them to other nodes (each
  // pays its checkpoint) rather than spread over nodes or wait.
  virtual bool defragments() const { return false; }
  // Whether the policy is asked every round even when no job waits (the
  // simulator otherwise runs such rounds as one): a policy that moves
  // running jobs between GPU models by turns.
  virtual bool every_round() const { return false; }
};

// How a job's node shares its cores between the jobs placed on it.
enum class CpuAllocation {
  Prop,  // GPU-proportional: cores * job's GPUs / node's GPUs (Synergy's baseline)
  Tune,  // Synergy-Tune: each job its engine-measured best cores, no job below its proportional share
  // Synergy-Greedy: each job, in the policy's order, its best cores on GPUs
  // whose node still has them, else it waits this round (Synergy's "skip").
  Greedy,
};
CpuAllocation parse_cpu_allocation(std::string_view text);
std::string_view to_string(CpuAllocation a);

struct LasOptions {
  // Tiresias' discretised 2D-LAS: queue limits in GPU-seconds of attained
  // service (a job moves down at each); FIFO by arrival within a queue.
  std::vector<double> queue_limits_gpu_s = {3600};
  // A job that has waited more than this times its run time (and at least
  // one round) is moved back to the top queue (Tiresias' STARVELIMIT).
  double starvation_factor = 0;  // 0: off
};

struct AlloxOptions {
  // The share of users (those of least fairness score) whose jobs the
  // matching considers each round (AlloX's alpha; its code's AlphaFair 0.5).
  double alpha = 0.5;
};

// "fifo", "srtf", "las", "drf-fifo", "drf", "allox", "es", "max-min", "timeslice", "max-min-perf",
// "gandiva"; InputError
// naming the policy and the accepted ones.
std::unique_ptr<Policy> make_policy(std::string_view name, const LasOptions& las = {}, const AlloxOptions& allox = {});
std::unique_ptr<Policy> make_fifo_policy();
std::unique_ptr<Policy> make_srtf_policy();
std::unique_ptr<Policy> make_las_policy(const LasOptions& options);
std::unique_ptr<Policy> make_drf_fifo_policy();
// DRF as AlloX's DRFS: the user of least dominant share next, its job of
// shortest time on either configuration, on that configuration.
std::unique_ptr<Policy> make_drf_policy();
// AlloX (Le et al., EuroSys 2020): min-cost matching of the waiting jobs of
// the alpha share of users of least fairness score to (machine, position)
// slots, GPU and CPU machines; the free machines start their first job.
std::unique_ptr<Policy> make_allox_policy(const AlloxOptions& options);
// AlloX's equal-share baseline (ES): static per-user shares of the GPUs and
// of the CPU configurations' cores, each user's shortest job first.
std::unique_ptr<Policy> make_es_policy();
// Gavel's max-min fairness: water-filled time shares of the GPUs, turned into
// rounds by Gavel's priority (share / fraction of time received).
std::unique_ptr<Policy> make_max_min_policy();
// Gavel's heterogeneity-aware max-min fairness (MaxMinFairnessPolicyWithPerf):
// the allocation over GPU models that maximises the least normalised
// throughput, from the engine's throughput of each job on each model.
std::unique_ptr<Policy> make_max_min_perf_policy();
std::unique_ptr<Policy> make_timeslice_policy();
// Gandiva (Xiao et al., OSDI 2018): time slicing, packing of two 1-GPU jobs
// on one GPU while the cluster is oversubscribed and the pair's engine speed
// beats slicing, and migration to defragment for multi-GPU jobs.
std::unique_ptr<Policy> make_gandiva_policy();
std::vector<std::string> policy_names();

}  // namespace gpemu::cluster

// ==== simulation ====

namespace gpemu::cluster {

// How a job's progress is found: at its memoised steady-state speed per
// configuration (any cluster), or by stepping each of its iterations through
// the engine's timeline on each allocation it runs on (small clusters).
enum class Fidelity { Speed, Iteration };
Fidelity parse_fidelity(std::string_view text);
std::string_view to_string(Fidelity f);

struct SimOptions {
  double round_s = 300;  // Synergy's and Gavel's default round
  Fidelity fidelity = Fidelity::Speed;
  CpuAllocation cpu = CpuAllocation::Prop;
  bool checkpoint_cost = true;  // preemption and resume cost their checkpoint I/O
  // Jobs packed on one GPU share it under this sharing policy (sharing_policy.h).
  std::string pack_sharing = "timeslice";
  // Jobs on one node slow each other as the engine runs them together there
  // (their loaders' shared cores, the node's PCIe links): a session of the
  // node's jobs per set of configurations. Off: each job as if alone on its
  // GPUs (jobs packed on a GPU are co-located either way).
  bool node_interference = false;
  // Utilisation samples: one per this many seconds of simulated time (0: one
  // per round, at most 10,000 samples in all).
  double util_every_s = 0;
  std::function<void(std::size_t done, std::size_t total, double now_s)> progress;
};

struct JobResult {
  std::string id, user, model;
  int gpus = 0;
  std::int64_t iterations = 0;
  double arrival_s = 0, start_s = -1, finish_s = -1;
  double wait_s() const { return start_s < 0 ? 0 : start_s - arrival_s; }
  double jct_s() const { return finish_s < 0 ? 0 : finish_s - arrival_s; }
  double gpu_s = 0;  // GPU-seconds held (checkpoint time included)
  double cpu_s = 0;  // core-seconds held
  int preemptions = 0;
  int migrations = 0;   // moved while running (its GPUs changed from one round to the next)
  double packed_s = 0;  // seconds it ran sharing its GPU with another job
  bool on_cpu = false;  // ran on its CPU configuration (last placed there)
  bool finished() const { return finish_s >= 0; }
};

struct UtilSample {
  double t_s = 0;
  int busy_gpus = 0;
  int busy_cpus = 0;
  int active_jobs = 0;  // arrived and unfinished
};

struct ClusterRun {
  std::string policy, cpu_allocation;
  double round_s = 0;
  int total_gpus = 0, total_cpus = 0;
  std::vector<JobResult> jobs;  // trace order
  std::vector<UtilSample> utilisation;
  double makespan_s = 0;
  std::int64_t rounds = 0;               // rounds the policy was asked
  std::size_t speed_configurations = 0;  // engine figures computed
  std::size_t colocations = 0;           // engine figures of co-located jobs computed
  std::string fidelity = "speed";
  std::int64_t engine_steps = 0;  // Fidelity::Iteration: iterations the engine stepped
  std::string stopped;            // why the policy ended the run early ("": it ran to the end)
  double stopped_at_s = 0;
  double mean_jct_s() const;
};

ClusterRun simulate(const ClusterConfig& cluster, const Trace& trace, Policy& policy, const SimOptions& options,
                    JobSpeed& speed);

// Sorted JCTs and their CDF values (i / n).
std::vector<std::pair<double, double>> jct_cdf(const ClusterRun& run);
// One row per job: id, user, model, gpus, iterations, arrival_s, start_s,
// finish_s, wait_s, jct_s, gpu_s, cpu_s, preemptions.
std::string run_csv(const ClusterRun& run);
// The run as an HTML report (report.h): the summary, GPU and core
// utilisation over time, every job's JCT sorted.
RunReport cluster_report(const ClusterRun& run);

}  // namespace gpemu::cluster

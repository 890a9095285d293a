// A preprocessing-service worker (prep_serve.h): one process, pinned to its
// cores, serving the clients that open a job with it. Per connection: an
// "open" frame with the job, then one "epoch" frame per epoch, answered by
// this worker's batches of that epoch (batch j where j mod N is its index),
// each a "batch" frame, then an "end" frame with what it did.
#include "prep/worker.h"

#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/interrupt.h"
#include "common/message_text.h"
#include "common/socket_wait.h"
#include "gpemu/error.h"
#include "gpemu/pipeline/io.h"
#include "pipeline/sample_decode.h"
#include "prep/connections.h"
#include "prep/job.h"
#include "prep/wire.h"

namespace gpemu::prep {
namespace {

std::int64_t thread_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// What a worker did for one connection in one epoch.
struct Counters {
  std::atomic<std::uint64_t> samples_read{0}, bytes_read{0}, samples_decoded{0}, batches_collated{0}, batches_sent{0},
      bytes_sent{0};
  std::atomic<std::int64_t> cpu_ns{0};
  nlohmann::json json() const {
    return {{"samples_read", samples_read.load()},
            {"bytes_read", bytes_read.load()},
            {"samples_decoded", samples_decoded.load()},
            {"batches_collated", batches_collated.load()},
            {"batches_sent", batches_sent.load()},
            {"bytes_sent", bytes_sent.load()},
            {"cpu_s", static_cast<double>(cpu_ns.load()) / 1e9}};
  }
};

// A core's tools: its reader and decoder, kept across batches.
struct Core {
  pipeline::FileReader reader;
  pipeline::JpegDecoder decoder;
};

struct Made {
  nlohmann::json message;
  std::vector<std::byte> payload;
};

class Connection {
 public:
  // fd stays open: its owner closes it once this is done.
  Connection(int fd, const WorkerSetup& setup) : fd_(fd), setup_(setup) {}

  void serve() {
    const int reply_ms = static_cast<int>(setup_.options.reply_timeout / kMillisecond);
    const int idle_ms = static_cast<int>(setup_.options.idle_timeout / kMillisecond);
    wire::Frame f;
    if (!read_request(f, reply_ms)) return;
    if (wire::op_of(f.message) != "open")
      return wire::send_error(fd_, fmt::format("worker {}: the first request must be 'open' with a job, not '{}'",
                                               setup_.index, printable_excerpt(wire::op_of(f.message), 40)));
    try {
      job_ = job_from_json(f.message.value("job", nlohmann::json::object()));
      const int index = f.message.value("worker", -1), workers = f.message.value("workers", 0);
      if (index != setup_.index || workers != setup_.workers)
        throw InputError(fmt::format("worker {} of {}: the client opened it as worker {} of {}", setup_.index,
                                     setup_.workers, index, workers));
      dataset_ = open_job_dataset(job_);
    } catch (const Error& e) {
      return wire::send_error(fd_, e.what());
    }
    nlohmann::json cpus = setup_.cpus;
    if (!wire::write_frame(fd_, {{"ok", true},
                                 {"pid", ::getpid()},
                                 {"worker", setup_.index},
                                 {"cpus", cpus},
                                 {"samples", dataset_.size()}}))
      return;
    cores_.resize(static_cast<std::size_t>(std::max(setup_.options.cpus_per_worker, 1)));
    for (auto& c : cores_) c = std::make_unique<Core>();
    for (;;) {
      if (!read_request(f, idle_ms)) return;
      const std::string op = wire::op_of(f.message);
      if (op == "bye") return;
      if (op != "epoch" || !f.message.contains("epoch") || !f.message["epoch"].is_number_unsigned())
        return wire::send_error(
            fd_, fmt::format("worker {}: a request 'epoch' with a whole-number epoch was expected, not '{}'",
                             setup_.index, printable_excerpt(op, 40)));
      if (!run_epoch(f.message["epoch"].get<std::uint64_t>())) return;
    }
  }

 private:
  bool read_request(wire::Frame& f, int first_ms) {
    const wire::ReadResult r =
        wire::read_frame(fd_, f, first_ms, static_cast<int>(setup_.options.reply_timeout / kMillisecond));
    if (r.got == wire::Got::Bad) wire::send_error(fd_, fmt::format("worker {}: a bad frame: {}", setup_.index, r.why));
    return r.got == wire::Got::Frame;
  }

  // Makes the epoch's batches of this worker on a thread of its own and
  // sends them from this one, at most worker_buffer ahead.
  bool run_epoch(std::uint64_t epoch) {
    Counters counters;
    const auto batches = epoch_batches(job_, dataset_.size(), epoch);
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Made> queue;
    bool made_all = false, cancelled = false;
    std::thread maker([&] {
      const auto n = static_cast<std::size_t>(setup_.workers);
      for (std::size_t j = static_cast<std::size_t>(setup_.index); j < batches.size(); j += n) {
        Made m = make_batch(epoch, j, batches[j], counters);
        const bool failed = !m.message.value("ok", true);
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return cancelled || queue.size() < kWorkerBuffer; });
        if (cancelled) return;
        queue.push_back(std::move(m));
        cv.notify_all();
        if (failed) break;
      }
      std::lock_guard lock(mu);
      made_all = true;
      cv.notify_all();
    });
    bool ok = true;
    for (;;) {
      Made m;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return made_all || !queue.empty(); });
        if (queue.empty()) break;
        m = std::move(queue.front());
        queue.pop_front();
        cv.notify_all();
      }
      const std::int64_t c0 = thread_cpu_ns();
      ok = wire::write_frame(fd_, m.message, m.payload, static_cast<int>(setup_.options.idle_timeout / kMillisecond));
      counters.cpu_ns += thread_cpu_ns() - c0;
      if (ok && !m.message.value("ok", true)) ok = false;  // an error sent: the epoch ends here
      if (!ok) break;
      ++counters.batches_sent;
      counters.bytes_sent += m.payload.size();
    }
    {
      std::lock_guard lock(mu);
      cancelled = true;
      cv.notify_all();
    }
    maker.join();
    if (!ok) return false;
    return wire::write_frame(fd_, {{"op", "end"}, {"epoch", epoch}, {"counters", counters.json()}});
  }

  // Batch j: read (and with decode or all, decode and transform) its samples,
  // its C cores sharing them; an error frame naming the sample when one fails.
  Made make_batch(std::uint64_t epoch, std::size_t j, const std::vector<std::size_t>& indices, Counters& counters) {
    const auto& t = job_.transform;
    const bool decode = job_.offload != pipeline::PrepOffload::Read;
    const std::size_t slot = std::size_t{3} * static_cast<std::size_t>(t.height) * static_cast<std::size_t>(t.width);
    std::vector<std::uint64_t> offsets{0};
    for (std::size_t idx : indices)
      offsets.push_back(offsets.back() + (decode ? slot * sizeof(float) : dataset_.samples[idx].length));
    Made m;
    m.payload.resize(offsets.back());
    std::vector<std::string> errors(indices.size());
    auto work = [&](std::size_t core) {
      const std::int64_t c0 = thread_cpu_ns();
      Core& c = *cores_[core];
      for (std::size_t k = core; k < indices.size(); k += cores_.size()) {
        const pipeline::Sample& s = dataset_.samples[indices[k]];
        try {
          const std::span<const std::byte> bytes = c.reader.read(s.path, s.offset, s.length);
          ++counters.samples_read;
          counters.bytes_read += bytes.size();
          std::byte* out = m.payload.data() + offsets[k];
          if (!decode) {
            std::memcpy(out, bytes.data(), bytes.size());
            continue;
          }
          pipeline::decode_jpeg_sample(c.decoder, bytes, pipeline::sample_seed(job_.seed, epoch, indices[k]), t,
                                       job_.jpeg_validation, reinterpret_cast<float*>(out));
          ++counters.samples_decoded;
        } catch (const std::exception& e) {
          errors[k] = fmt::format("sample {} '{}': {}", indices[k], s.path, e.what());
        }
      }
      counters.cpu_ns += thread_cpu_ns() - c0;
    };
    std::vector<std::thread> helpers;
    for (std::size_t core = 1; core < std::min(cores_.size(), indices.size()); ++core) helpers.emplace_back(work, core);
    work(0);
    for (auto& h : helpers) h.join();
    for (const std::string& e : errors)
      if (!e.empty()) return {{{"ok", false}, {"error", fmt::format("worker {}: {}", setup_.index, e)}}, {}};
    if (job_.offload == pipeline::PrepOffload::All) ++counters.batches_collated;  // decoded in place, in batch order
    nlohmann::json labels = nlohmann::json::array();
    for (std::size_t idx : indices) labels.push_back(dataset_.samples[idx].label);
    m.message = {{"op", "batch"}, {"epoch", epoch}, {"index", j}, {"samples", indices}, {"labels", labels}};
    if (!decode) m.message["offsets"] = offsets;
    return m;
  }

  static constexpr std::size_t kWorkerBuffer = 2;  // finished batches held (the modelled service's default)
  int fd_;
  const WorkerSetup& setup_;
  PrepJob job_;
  pipeline::Dataset dataset_;
  std::vector<std::unique_ptr<Core>> cores_;
};

}  // namespace

std::string pin_to_cores(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) return std::strerror(errno);
  return "";
}

int run_worker(const WorkerSetup& setup) {
  // Ends with the dispatcher, however it ends.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != setup.dispatcher) return 0;
  if (const std::string why = pin_to_cores(setup.cpus); !why.empty())
    std::fprintf(stderr, "gpemu prep serve: worker %d cannot be pinned to its cores: %s\n", setup.index, why.c_str());
  Connections connections;
  while (!interrupt_requested() && ::getppid() == setup.dispatcher) {
    connections.sweep(false);
    if (!common::wait_ready(setup.listen_fd, POLLIN, common::deadline_in(200))) continue;
    const int fd = ::accept4(setup.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) connections.add(fd, [&setup](int c) { Connection(c, setup).serve(); });
  }
  connections.sweep(true);
  return 0;
}

}  // namespace gpemu::prep

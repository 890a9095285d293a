// The training job's side of the preprocessing service (prep_serve.h): it
// registers the job with the dispatcher and reads every worker's batches
// on a thread per worker (at most prefetch_factor of a worker's batches
// ahead of the training loop); with offload read or decode, its local
// threads run the rest of the pipeline (decode and transform, or batch).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <sys/socket.h>

#include "common/interrupt.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "pipeline/sample_decode.h"
#include "prep/job.h"
#include "prep/wire.h"

namespace gpemu::prep {
namespace {

// A batch as a worker sent it.
struct Received {
  nlohmann::json message;
  std::vector<std::byte> payload;
  Time arrived = 0;
  Duration receive = 0;  // this thread's time reading it
};

std::string worker_name(const PrepWorkerInfo& w) { return fmt::format("worker {} (pid {})", w.index, w.pid); }

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& text, const std::string& flag) {
  const auto colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long n = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (host.empty() || n < 1 || n > 65535 || *end != '\0')
    throw InputError(
        fmt::format("{} '{}': give HOST:PORT (e.g. 127.0.0.1:7070, or [::1]:7070), a port 1 to 65535", flag, text));
  return {host, static_cast<int>(n)};
}

std::string PrepServiceCounters::describe() const {
  return fmt::format(
      "preprocessing service: the workers read {} samples ({:.1f} MB), decoded {}, batched {}, sent {} batches "
      "({:.1f} MB) in {:.2f} s of their CPU; the client decoded {} and batched {}",
      worker_samples_read, static_cast<double>(worker_bytes_read) / 1e6, worker_samples_decoded,
      worker_batches_collated, worker_batches_sent, static_cast<double>(worker_bytes_sent) / 1e6, worker_cpu_s,
      client_samples_decoded, client_batches_collated);
}

struct PrepServiceSource::Impl {
  Clock& clock;
  PrepClientOptions o;
  std::vector<PrepWorkerInfo> workers;
  std::size_t samples = 0, batches = 0;
  std::uint64_t job_id = 0;
  std::vector<int> fds;  // per worker

  std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  bool stop = false;
  bool active = false;
  std::uint64_t epoch = 0;
  std::size_t next_deliver = 0;
  std::vector<std::size_t> next_receive;  // per worker: the next of its batches to read
  std::vector<char> ended;                // per worker: its "end" came this epoch
  std::map<std::size_t, Received> received;
  std::map<std::size_t, pipeline::LoadedBatch> ready;
  std::string failure;  // the first thing that went wrong
  int failed_worker = -1;
  bool connection_lost = false;
  PrepServiceCounters counters;
  pipeline::LoaderStats stats;
  std::vector<std::thread> threads;

  Impl(Clock& c, PrepClientOptions opt) : clock(c), o(std::move(opt)) {}

  int ms(Duration d) const { return static_cast<int>(d / kMillisecond); }
  std::string where() const { return fmt::format("preprocessing service {}:{}", o.host, o.port); }

  // One request to the dispatcher on a connection of its own.
  nlohmann::json ask_dispatcher(const nlohmann::json& request) {
    int fd = wire::connect_tcp(o.host, o.port, ms(o.reply_timeout));
    wire::Frame f;
    const bool sent = wire::write_frame(fd, request, {}, ms(o.reply_timeout));
    const wire::ReadResult r = sent ? wire::read_frame(fd, f, ms(o.reply_timeout), ms(o.reply_timeout))
                                    : wire::ReadResult{wire::Got::Closed, ""};
    if (r.got == wire::Got::Frame) wire::write_frame(fd, {{"op", "bye"}}, {}, 100);
    wire::close_fd(fd);
    if (r.got == wire::Got::Bad) throw Error(fmt::format("{} is not a gpemu prep service: {}", where(), r.why));
    if (r.got != wire::Got::Frame)
      throw Error(fmt::format("{} did not answer '{}'{}", where(), request.value("op", ""),
                              r.got == wire::Got::Timeout ? fmt::format(" within {:g} s", to_seconds(o.reply_timeout))
                                                          : ": it closed the connection"));
    if (!f.message.value("ok", false)) {
      const std::string error = one_line_message(f.message.value("error", std::string("refused")));
      if (f.message.value("kind", std::string()) == "input") throw InputError(error);
      throw Error(fmt::format("{} refused: {}", where(), error));
    }
    return f.message;
  }

  void register_job() {
    const nlohmann::json reply = ask_dispatcher({{"op", "register"}, {"job", job_json(o.job)}});
    job_id = reply.value("job", std::uint64_t{0});
    samples = reply.value("samples", std::size_t{0});
    batches = reply.value("batches", std::size_t{0});
    const auto& list = reply.value("workers", nlohmann::json::array());
    if (samples == 0 || batches != prep::batches_per_epoch(o.job, samples) || list.empty())
      throw Error(fmt::format("{} answered the registration without its samples, batches or workers", where()));
    for (const auto& w : list) {
      PrepWorkerInfo info;
      info.index = w.value("index", 0);
      info.pid = w.value("pid", 0);
      info.port = w.value("port", 0);
      info.cpus = w.value("cpus", std::vector<int>{});
      workers.push_back(info);
    }
  }

  // Opens the job with every worker.
  void connect_workers() {
    fds.assign(workers.size(), -1);
    for (std::size_t i = 0; i < workers.size(); ++i) {
      PrepWorkerInfo& w = workers[i];
      fds[i] = wire::connect_tcp(o.host, w.port, ms(o.reply_timeout));
      wire::Frame f;
      const bool sent = wire::write_frame(fds[i],
                                          {{"op", "open"},
                                           {"job", job_json(o.job)},
                                           {"worker", w.index},
                                           {"workers", static_cast<int>(workers.size())}},
                                          {}, ms(o.reply_timeout));
      const wire::ReadResult r = sent ? wire::read_frame(fds[i], f, ms(o.reply_timeout), ms(o.reply_timeout))
                                      : wire::ReadResult{wire::Got::Closed, ""};
      if (r.got != wire::Got::Frame) throw Error(lost_text(i, r, "opening the job"));
      if (!f.message.value("ok", false))
        throw Error(fmt::format("{}: {} refused the job: {}", where(), worker_name(w),
                                one_line_message(f.message.value("error", std::string("refused")))));
      w.pid = f.message.value("pid", w.pid);
      if (f.message.value("samples", std::size_t{0}) != samples)
        throw Error(fmt::format("{}: {} sees {} samples in '{}' where the dispatcher saw {}: give them one folder",
                                where(), worker_name(w), f.message.value("samples", std::size_t{0}), o.job.dataset,
                                samples));
    }
  }

  // Why worker i's connection ended: the dispatcher's word on it when it saw
  // the worker end (asked a few times: it reaps its workers every 100 ms).
  std::string lost_text(std::size_t i, const wire::ReadResult& r, const std::string& doing) {
    const PrepWorkerInfo& w = workers[i];
    if (r.got == wire::Got::Bad)
      return fmt::format("{}: {} sent a bad frame {}: {}", where(), worker_name(w), doing, r.why);
    if (r.got == wire::Got::Timeout && !interrupt_requested())
      return fmt::format("{}: {} sent nothing for {:g} s {}", where(), worker_name(w), to_seconds(o.batch_timeout),
                         doing);
    if (interrupt_requested()) return fmt::format("{}: interrupted {}", where(), doing);
    std::string how;
    for (int attempt = 0; attempt < 20 && how.empty(); ++attempt) {
      try {
        const nlohmann::json s = ask_dispatcher({{"op", "status"}});
        for (const auto& x : s.value("workers", nlohmann::json::array()))
          if (x.value("index", -1) == w.index && !x.value("alive", true)) how = x.value("exit", std::string("ended"));
      } catch (const Error& e) {
        how = fmt::format("and the dispatcher cannot say why ({})", e.what());
      }
      if (how.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (how.empty()) how = "closed its connection (the dispatcher lists it alive)";
    return fmt::format("{}: {} {} {}", where(), worker_name(w),
                       how.rfind("and", 0) == 0 ? "closed its connection " + how : how, doing);
  }

  void fail(std::size_t worker, std::string why) {
    std::lock_guard lock(mu);
    if (failure.empty()) {
      failure = std::move(why);
      failed_worker = static_cast<int>(worker);
    }
    cv.notify_all();
  }

  // A thread's loop: what it throws (a field of the wrong type from a bad
  // peer) fails the source instead of ending the process.
  template <typename Loop>
  void guarded(std::size_t w, Loop loop) {
    try {
      loop();
    } catch (const std::exception& e) {
      fail(w,
           one_line_message(fmt::format("{}: a bad answer from {}: {}", where(), worker_name(workers[w]), e.what())));
    }
  }

  // Reads worker w's frames: its batches in order, at most prefetch_factor
  // of them ahead of the training loop, then its "end".
  void receive_loop(std::size_t w) {
    const std::size_t n = workers.size();
    const auto window = static_cast<std::size_t>(std::max(o.prefetch_factor, 1)) * n;
    for (;;) {
      std::uint64_t e = 0;
      std::size_t want = 0;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] {
          return stop || (active && failure.empty() && !ended[w] &&
                          (next_receive[w] >= batches || next_receive[w] < next_deliver + window));
        });
        if (stop) return;
        e = epoch;
        want = next_receive[w];
      }
      const std::string doing = want < batches ? fmt::format("before sending batch {} of epoch {}", want, e)
                                               : fmt::format("before ending epoch {}", e);
      Received got;
      wire::Frame f;
      const Time t0 = clock.now();
      const wire::ReadResult r = wire::read_frame(fds[w], f, ms(o.batch_timeout), ms(o.batch_timeout));
      got.receive = clock.now() - t0;
      if (r.got != wire::Got::Frame) {
        {
          std::lock_guard lock(mu);
          if (stop) return;
        }
        return fail(w, lost_text(w, r, doing));
      }
      const std::string op = printable_excerpt(wire::op_of(f.message), 40);
      if (!f.message.value("ok", true))
        return fail(w, fmt::format("{}: {}", where(), one_line_message(f.message.value("error", ""))));
      if (op == "end" && want >= batches) {
        std::lock_guard lock(mu);
        const auto& c = f.message.value("counters", nlohmann::json::object());
        counters.worker_samples_read += c.value("samples_read", std::uint64_t{0});
        counters.worker_bytes_read += c.value("bytes_read", std::uint64_t{0});
        counters.worker_samples_decoded += c.value("samples_decoded", std::uint64_t{0});
        counters.worker_batches_collated += c.value("batches_collated", std::uint64_t{0});
        counters.worker_batches_sent += c.value("batches_sent", std::uint64_t{0});
        counters.worker_bytes_sent += c.value("bytes_sent", std::uint64_t{0});
        counters.worker_cpu_s += c.value("cpu_s", 0.0);
        stats.bytes_read += c.value("bytes_read", std::uint64_t{0});
        ended[w] = 1;
        cv.notify_all();
        continue;
      }
      if (op != "batch" || f.message.value("index", batches) != want || f.message.value("epoch", e + 1) != e)
        return fail(w, fmt::format("{}: {} sent '{}' (batch {} of epoch {}) where batch {} of epoch {} was due",
                                   where(), worker_name(workers[w]), op, f.message.value("index", -1),
                                   f.message.value("epoch", -1), want, e));
      got.message = std::move(f.message);
      got.payload = std::move(f.payload);
      got.arrived = clock.now();
      std::lock_guard lock(mu);
      counters.client_bytes_received += got.payload.size();
      next_receive[w] = std::min(want + n, batches);  // batches: its "end" comes next
      if (o.job.offload == pipeline::PrepOffload::All)
        ready[want] = finish(e, want, std::move(got), 0);
      else
        received[want] = std::move(got);
      cv.notify_all();
    }
  }

  pipeline::LoadedBatch finish(std::uint64_t e, std::size_t index, Received r, Duration decode) {
    pipeline::LoadedBatch b;
    b.epoch = e;
    b.index = index;
    b.sample_indices = r.message.value("samples", std::vector<std::size_t>{});
    b.samples = static_cast<std::int64_t>(b.sample_indices.size());
    b.bytes = r.payload.size();
    b.memory = HostMemoryKind::Pageable;
    b.ready = clock.now();
    b.read = r.receive;
    b.decode = decode;
    b.keep_alive = std::make_shared<std::vector<std::byte>>(std::move(r.payload));
    return b;
  }

  // The client's share of a batch: decode and transform each sample (read),
  // or batch the decoded samples (decode: a copy into the batch's buffer).
  pipeline::LoadedBatch local_part(std::size_t index, Received r, pipeline::JpegDecoder& decoder, std::uint64_t e,
                                   std::uint64_t& decoded) {
    const Time t0 = clock.now();
    const auto& t = o.job.transform;
    const std::size_t slot = std::size_t{3} * static_cast<std::size_t>(t.height) * static_cast<std::size_t>(t.width);
    const auto indices = r.message.value("samples", std::vector<std::size_t>{});
    std::vector<std::byte> out(indices.size() * slot * sizeof(float));
    if (o.job.offload == pipeline::PrepOffload::Read) {
      const auto offsets = r.message.value("offsets", std::vector<std::uint64_t>{});
      if (offsets.size() != indices.size() + 1 || offsets.back() != r.payload.size())
        throw Error(fmt::format("{}: batch {} came with offsets that do not match its {} bytes", where(), index,
                                r.payload.size()));
      for (std::size_t k = 0; k < indices.size(); ++k) {
        if (offsets[k] > offsets[k + 1])
          throw Error(fmt::format("{}: batch {} came with offsets out of order", where(), index));
        const std::span<const std::byte> bytes(r.payload.data() + offsets[k], offsets[k + 1] - offsets[k]);
        try {
          pipeline::decode_jpeg_sample(decoder, bytes, pipeline::sample_seed(o.job.seed, e, indices[k]), t,
                                       o.job.jpeg_validation,
                                       reinterpret_cast<float*>(out.data() + k * slot * sizeof(float)));
        } catch (const Error& ex) {
          throw Error(fmt::format("sample {} (as the service read it): {}", indices[k], ex.what()));
        }
        ++decoded;
      }
    } else {
      if (r.payload.size() != out.size())
        throw Error(fmt::format("{}: batch {} came with {} bytes, not {} samples of 3x{}x{} floats", where(), index,
                                r.payload.size(), indices.size(), t.height, t.width));
      for (std::size_t k = 0; k < indices.size(); ++k)  // each decoded sample into its place in the batch
        std::memcpy(out.data() + k * slot * sizeof(float), r.payload.data() + k * slot * sizeof(float),
                    slot * sizeof(float));
    }
    const Duration spent = clock.now() - t0;
    r.payload = std::move(out);
    return finish(e, index, std::move(r), spent);
  }

  void local_loop() {
    pipeline::JpegDecoder decoder;
    for (;;) {
      std::size_t index = 0;
      Received r;
      std::uint64_t e = 0;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || (!received.empty() && failure.empty()); });
        if (stop) return;
        auto it = received.begin();
        index = it->first;
        r = std::move(it->second);
        received.erase(it);
        e = epoch;
      }
      std::uint64_t decoded = 0;
      try {
        pipeline::LoadedBatch b = local_part(index, std::move(r), decoder, e, decoded);
        std::lock_guard lock(mu);
        counters.client_samples_decoded += decoded;
        if (o.job.offload == pipeline::PrepOffload::Decode) ++counters.client_batches_collated;
        ready[index] = std::move(b);
        cv.notify_all();
      } catch (const std::exception& ex) {
        return fail(0, fmt::format("{}: the client's part of batch {}: {}", where(), index, ex.what()));
      }
    }
  }

  void start_threads() {
    stop = false;
    next_receive.assign(workers.size(), 0);
    ended.assign(workers.size(), 0);
    for (std::size_t w = 0; w < workers.size(); ++w)
      threads.emplace_back([this, w] { guarded(w, [&] { receive_loop(w); }); });
    if (o.job.offload != pipeline::PrepOffload::All)
      for (int k = 0; k < std::max(o.local_workers, 1); ++k)
        threads.emplace_back([this] { guarded(0, [&] { local_loop(); }); });
  }

  void stop_threads() {
    {
      std::lock_guard lock(mu);
      stop = true;
      cv.notify_all();
    }
    for (int fd : fds)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : threads) t.join();
    threads.clear();
    for (int& fd : fds) wire::close_fd(fd);
  }

  bool epoch_finished() const {
    return next_deliver >= batches && std::all_of(ended.begin(), ended.end(), [](char c) { return c != 0; });
  }
};

PrepServiceSource::PrepServiceSource(Clock& clock, PrepClientOptions options)
    : impl_(std::make_unique<Impl>(clock, std::move(options))) {
  Impl& s = *impl_;
  if (s.o.job.offload == pipeline::PrepOffload::None)
    throw InputError("preprocessing service: offload 'none' sends the workers nothing: read, decode or all");
  if (!clock.monotonic_epoch_ns())
    throw InputError(
        "the preprocessing service runs in wall time and cannot feed a virtual-clock run: give --clock real (the "
        "modelled service is --prep-workers)");
  try {
    s.register_job();
    s.connect_workers();
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    for (int& fd : s.fds) wire::close_fd(fd);
    throw Error(one_line_message(fmt::format("{} answered with a malformed message: {}", s.where(), e.what())));
  }
  s.start_threads();
}

PrepServiceSource::~PrepServiceSource() {
  Impl& s = *impl_;
  s.stop_threads();
}

void PrepServiceSource::begin_epoch(std::uint64_t epoch) {
  Impl& s = *impl_;
  bool fresh = false;
  {
    std::lock_guard lock(s.mu);
    fresh = !s.active || s.epoch_finished();
  }
  if (!fresh) {  // an epoch left halfway: its batches in flight go with new connections
    s.stop_threads();
    s.received.clear();
    s.ready.clear();
    s.active = false;  // the new receivers wait for the new epoch
    s.connect_workers();
    s.start_threads();
  }
  std::lock_guard lock(s.mu);
  if (!s.failure.empty()) throw Error(s.failure);
  s.epoch = epoch;
  s.next_deliver = 0;
  std::fill(s.next_receive.begin(), s.next_receive.end(), 0);
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    s.next_receive[w] = std::min(w, s.batches);
    s.ended[w] = 0;
    if (!wire::write_frame(s.fds[w], {{"op", "epoch"}, {"epoch", epoch}}, {}, s.ms(s.o.reply_timeout))) {
      s.failure = s.lost_text(w, {wire::Got::Closed, ""}, fmt::format("before epoch {} began", epoch));
      throw Error(s.failure);
    }
  }
  s.active = true;
  s.cv.notify_all();
}

std::optional<pipeline::LoadedBatch> PrepServiceSource::next(const pipeline::SleepFn&) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mu);
  if (!s.active) {
    lock.unlock();
    begin_epoch(0);
    lock.lock();
  }
  if (s.next_deliver >= s.batches) {
    s.cv.wait(lock, [&] { return !s.failure.empty() || s.epoch_finished(); });
    if (!s.epoch_finished()) throw Error(s.failure);
    return std::nullopt;
  }
  s.cv.wait(lock, [&] { return !s.failure.empty() || s.ready.count(s.next_deliver) != 0 || interrupt_requested(); });
  const auto it = s.ready.find(s.next_deliver);
  if (it == s.ready.end()) {
    if (const int sig = interrupt_signal()) throw Interrupted(sig);
    throw Error(s.failure);
  }
  pipeline::LoadedBatch b = std::move(it->second);
  s.ready.erase(it);
  ++s.next_deliver;
  ++s.stats.batches;
  s.stats.samples += static_cast<std::uint64_t>(b.samples);
  s.cv.notify_all();
  return b;
}

std::size_t PrepServiceSource::batches_per_epoch() const { return impl_->batches; }
std::size_t PrepServiceSource::samples_per_epoch() const {
  return impl_->o.job.drop_last ? impl_->batches * impl_->o.job.batch_size : impl_->samples;
}

std::string PrepServiceSource::describe() const {
  const Impl& s = *impl_;
  const std::size_t cpus = s.workers.front().cpus.size();
  const int local = std::max(s.o.local_workers, 1);
  return fmt::format("preprocessing service {}:{} (job {}): {} worker{} of {} CPU{}, offload {}, {}", s.o.host,
                     s.o.port, s.job_id, s.workers.size(), s.workers.size() == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s",
                     pipeline::to_string(s.o.job.offload),
                     s.o.job.offload == pipeline::PrepOffload::All
                         ? std::string("whole batches")
                         : fmt::format("{} local thread{}", local, local == 1 ? "" : "s"));
}

pipeline::LoaderStats PrepServiceSource::stats() const {
  std::lock_guard lock(impl_->mu);
  pipeline::LoaderStats st = impl_->stats;
  st.network_bytes = impl_->counters.client_bytes_received;
  st.notes.push_back(impl_->counters.describe());
  return st;
}

PrepServiceCounters PrepServiceSource::counters() const {
  std::lock_guard lock(impl_->mu);
  return impl_->counters;
}

std::vector<PrepWorkerInfo> PrepServiceSource::workers() const { return impl_->workers; }

}  // namespace gpemu::prep

#include "dist/node_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/message_text.h"
#include "dist/tcp_store.h"
#include "gpemu/error.h"

#ifdef GPEMU_HAVE_GLOO
#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace gpemu::dist {
namespace {

// The address this machine (or namespace) sends from to reach `addr`: what
// the other nodes reach it at. A UDP connect sends nothing.
std::string source_address(const std::string& addr, int port) {
  sockaddr_in a = resolve_ipv4(addr, port);
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    ::close(s);
    throw InputError(fmt::format("MASTER_ADDR {}: give rank 0's address, one this node has a route to ({})",
                                 printable_excerpt(addr, 64), std::strerror(err)));
  }
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return text;
}

#ifdef GPEMU_HAVE_GLOO
// gloo's rendezvous through our TCP store.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(TcpStoreClient& c, std::chrono::milliseconds timeout) : c_(c), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { c_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return c_.get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const auto& k : keys) c_.get(k, timeout);
  }

 private:
  TcpStoreClient& c_;
  std::chrono::milliseconds timeout_;
};
#endif

}  // namespace

bool have_gloo() {
#ifdef GPEMU_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

struct NodeGroup::Impl {
  LaunchEnv env;
  NodeGroupOptions options;
  std::string address;
  std::uint64_t floats = 0;
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> client;
  std::atomic<std::uint64_t> exchanges{0};
  std::atomic<std::int64_t> exchange_ns{0};
#ifdef GPEMU_HAVE_GLOO
  std::unique_ptr<StoreAdapter> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> rails;
#endif
  std::vector<std::vector<float>> buffers;

  // What a failed collective or rendezvous says: which rank went away, if the store saw one.
  // Rank 0 serves the store itself: it asks its server in-process (its own
  // client's connection ends with a timed-out wait, and the server then
  // counts rank 0 as gone), and names a rank that never said hello.
  [[noreturn]] void fail(const std::string& during, const std::string& reason) {
    std::string who;
    auto name = [&who](const std::vector<int>& ranks, const char* one, const char* many) {
      for (int r : ranks) who += (who.empty() ? "rank " : ", rank ") + std::to_string(r);
      if (!who.empty()) who += ranks.size() == 1 ? one : many;
    };
    if (server) {
      std::vector<int> gone, never;
      for (int r : server->gone(std::chrono::milliseconds(2000), env.rank))
        if (r != env.rank) gone.push_back(r);
      const std::vector<int> joined = server->joined();
      for (int r = 0; r < env.world_size; ++r)
        if (std::find(joined.begin(), joined.end(), r) == joined.end()) never.push_back(r);
      name(gone, " went away (its process ended)", " went away");
      if (who.empty())
        name(never, " never joined (its process did not start, or could not reach MASTER_ADDR:MASTER_PORT)",
             " never joined (their processes did not start, or could not reach MASTER_ADDR:MASTER_PORT)");
    } else {
      try {
        name(client->gone(std::chrono::milliseconds(2000)), " went away (its process ended)", " went away");
      } catch (const std::exception&) {
        who = fmt::format("rank 0 went away (its rendezvous store at {} is gone)", client->where());
      }
    }
    if (who.empty())
      who = fmt::format(
          "no rank's process ended, so one stopped answering for {} s (a hang, or a network that "
          "drops packets)",
          options.timeout.count() / 1000.0);
    throw Error(fmt::format("rank {} of {} ({}): {} during {}: {}", env.rank, env.world_size, address, who, during,
                            one_line_message(reason)));
  }
};

NodeGroup::NodeGroup(const LaunchEnv& env, const NodeGroupOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.env = env;
  m.options = options;
  if (!have_gloo())
    throw InputError(fmt::format(
        "{}: this gpemu was built without gloo, which runs the nodes' all-reduce over TCP; install libgloo-dev and "
        "build it again",
        env.launcher == "mpirun" ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE"));
  if (options.local_gpus < 1) throw std::logic_error("NodeGroup: local_gpus < 1");
  // gloo writes to its peers' sockets without MSG_NOSIGNAL: a peer whose
  // process ended would kill this one with SIGPIPE mid-step instead of
  // failing the collective, which is what names the rank that went away.
  // Ignored for the whole process from here on: a real-node run's own writes
  // (stdout, files) then fail with EPIPE, which the CLI reports as errors.
  ::signal(SIGPIPE, SIG_IGN);
  m.address = source_address(env.master_addr, env.master_port);
  m.floats =
      std::max<std::uint64_t>(2, (options.gradient_bytes / static_cast<std::uint64_t>(options.local_gpus) + 3) / 4);
  if (env.rank == 0) m.server = std::make_unique<TcpStoreServer>(env.master_addr, env.master_port);
  m.client = std::make_unique<TcpStoreClient>(env.master_addr, env.master_port, env.rank, options.timeout);
#ifdef GPEMU_HAVE_GLOO
  // Every rank must emulate the same GPUs per node and model: the rails and
  // their bytes must match, else the ring would mix different buffers.
  const std::string mine = fmt::format("{} GPUs, {} bytes a rail", options.local_gpus, m.floats * 4);
  m.client->set("gpemu/shape/" + std::to_string(env.rank), std::vector<char>(mine.begin(), mine.end()));
  for (int r = 0; r < env.world_size; ++r) {
    std::vector<char> theirs;
    try {
      theirs = m.client->get("gpemu/shape/" + std::to_string(r), options.timeout);
    } catch (const Error& e) {
      m.fail("the rendezvous", e.what());
    }
    if (std::string(theirs.begin(), theirs.end()) != mine)
      throw InputError(
          fmt::format("rank {} has {}, rank {} {}: give every rank the same --gpus-per-node, model and "
                      "batch size",
                      env.rank, mine, r, std::string(theirs.begin(), theirs.end())));
  }
  try {
    m.store = std::make_unique<StoreAdapter>(*m.client, options.timeout);
    gloo::transport::tcp::attr attr;
    attr.hostname = m.address;
    m.device = gloo::transport::tcp::CreateDevice(attr);
    for (int g = 0; g < options.local_gpus; ++g) {
      auto ctx = std::make_shared<gloo::rendezvous::Context>(env.rank, env.world_size);
      ctx->setTimeout(options.timeout);
      gloo::rendezvous::PrefixStore prefixed("gpemu/rail" + std::to_string(g), *m.store);
      ctx->connectFullMesh(prefixed, m.device);
      m.rails.push_back(std::move(ctx));
      m.buffers.emplace_back(m.floats, 0.0f);
    }
  } catch (const std::exception& e) {
    m.fail("the rendezvous", e.what());
  }
#endif
}

NodeGroup::~NodeGroup() = default;

int NodeGroup::node() const { return impl_->env.rank; }
int NodeGroup::nodes() const { return impl_->env.world_size; }
const std::string& NodeGroup::address() const { return impl_->address; }
std::uint64_t NodeGroup::rail_bytes() const { return impl_->floats * 4; }
std::uint64_t NodeGroup::exchanges() const { return impl_->exchanges; }
double NodeGroup::exchange_seconds() const { return static_cast<double>(impl_->exchange_ns) / 1e9; }
TcpStoreClient& NodeGroup::store() { return *impl_->client; }
std::chrono::milliseconds NodeGroup::timeout() const { return impl_->options.timeout; }
void NodeGroup::fail(const std::string& during, const std::string& reason) const { impl_->fail(during, reason); }

void NodeGroup::exchange(int local_gpu, std::uint64_t step) {
  Impl& m = *impl_;
#ifdef GPEMU_HAVE_GLOO
  std::vector<float>& buf = m.buffers.at(static_cast<std::size_t>(local_gpu));
  buf[0] = 1.0f;
  buf[1] = static_cast<float>(step);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    gloo::AllreduceOptions o(m.rails[static_cast<std::size_t>(local_gpu)]);
    o.setOutput(buf.data(), buf.size());
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
    o.setTimeout(m.options.timeout);
    gloo::allreduce(o);
  } catch (const std::exception& e) {
    m.fail(fmt::format("the all-reduce of step {} (GPU {} of node {})", step, local_gpu, m.env.rank), e.what());
  }
  m.exchange_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  ++m.exchanges;
  const auto n = static_cast<float>(m.env.world_size);
  if (buf[0] != n || buf[1] != n * static_cast<float>(step))
    throw Error(
        fmt::format("rank {}: the ranks are out of step: at step {} of GPU {} the all-reduce summed {} ranks "
                    "and steps {} (expected {} and {}); give every rank the same data, epochs and -n",
                    m.env.rank, step, local_gpu, buf[0], buf[1], n, n * static_cast<float>(step)));
#else
  (void)m;
  (void)local_gpu;
  (void)step;
#endif
}

}  // namespace gpemu::dist

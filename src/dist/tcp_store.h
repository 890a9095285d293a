// A small key-value store over TCP for the ranks' rendezvous, as torch's
// TCPStore is for torchrun: rank 0 serves it at MASTER_ADDR:MASTER_PORT, and
// every rank's client sets keys and waits for others' (gloo's TCP transport
// trades its addresses through it; gloo itself ships only file and Redis
// stores). Each client keeps its connection for the whole run and says
// goodbye before it closes, so the server knows which rank's process went
// away without one: that is how a rank whose collective failed names the
// rank that died (gone()).
//
// Thread safety: a client may be used from several threads (one request at a time).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpemu::dist {

// `addr` (a host name or an IPv4 address, as MASTER_ADDR is given) and
// `port` as a socket address; InputError naming MASTER_ADDR otherwise.
sockaddr_in resolve_ipv4(const std::string& addr, int port);

class TcpStoreServer {
 public:
  // Listens on `addr`:`port` (port 0: one the kernel picks); InputError
  // naming the address and the OS reason when it cannot.
  TcpStoreServer(const std::string& addr, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // What rank 0's own process knows, without a client's connection: the
  // ranks whose connection closed without a goodbye, and those that said hello.
  // gone(wait, except) waits up to `wait` for a rank other than `except` to be
  // seen gone: a peer's collective fails as soon as its socket resets, which
  // can be before this server's thread has read the end of the same process.
  std::vector<int> gone();
  std::vector<int> gone(std::chrono::milliseconds wait, int except);
  std::vector<int> joined();

 private:
  void accept_loop();
  void serve(int fd);

  int listen_fd_ = -1, port_ = 0, wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> data_;
  std::set<int> gone_;    // ranks whose connection closed without a goodbye
  std::set<int> joined_;  // ranks that said hello
  std::vector<int> clients_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

class TcpStoreClient {
 public:
  // Connects to the server as `rank`, retrying until `timeout` (rank 0 may
  // start later than the others); InputError naming the address when it cannot.
  TcpStoreClient(const std::string& addr, int port, int rank, std::chrono::milliseconds timeout);
  ~TcpStoreClient();  // says goodbye
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Waits for the key; Error when `timeout` passes first or the server is gone.
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout);
  // Ranks whose process went away, waiting up to `wait` for at least one to
  // be seen; Error when the server itself (rank 0) is gone.
  std::vector<int> gone(std::chrono::milliseconds wait);
  const std::string& where() const { return where_; }

 private:
  std::vector<char> request(char op, const std::string& key, const std::vector<char>& value, bool reply,
                            std::chrono::milliseconds timeout);
  std::mutex mu_;
  int fd_ = -1;
  std::string where_;  // "addr:port", for messages
};

}  // namespace gpemu::dist

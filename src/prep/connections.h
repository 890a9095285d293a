// The connections a preprocessing-service process (the dispatcher, a
// worker) serves, each on a thread of its own: finished ones are joined
// and closed as it goes, the rest woken (shutdown) and joined at its end.
// Used by the thread that accepts them.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "common/message_text.h"
#include "prep/wire.h"

namespace gpemu::prep {

class Connections {
 public:
  ~Connections() { sweep(true); }
  // Connections served at once at most; one more is refused with an error frame.
  static constexpr std::size_t kMaxConnections = 256;

  // Serves fd with serve(fd) on a new thread; fd is closed once it returns.
  // What serve throws (a field of the wrong type from a bad peer) ends that
  // connection with an error frame saying so, not the process.
  void add(int fd, std::function<void(int)> serve) {
    if (served_.size() >= kMaxConnections) {
      wire::send_error(fd, "this process serves 256 connections at once and has them: try again later", 100);
      ::close(fd);
      return;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    served_.push_back(
        {fd, done, std::thread([fd, done, serve = std::move(serve)] {
           try {
             serve(fd);
           } catch (const std::exception& e) {
             wire::send_error(fd, one_line_message(std::string("a request that cannot be served: ") + e.what()));
           }
           done->store(true);
         })});
  }
  // Joins and closes the finished connections; with `all`, every one (their reads see the end).
  void sweep(bool all) {
    for (auto it = served_.begin(); it != served_.end();) {
      if (!all && !it->done->load()) {
        ++it;
        continue;
      }
      ::shutdown(it->fd, SHUT_RDWR);
      it->thread.join();
      ::close(it->fd);
      it = served_.erase(it);
    }
  }

 private:
  struct Served {
    int fd;
    std::shared_ptr<std::atomic<bool>> done;
    std::thread thread;
  };
  std::list<Served> served_;
};

}  // namespace gpemu::prep

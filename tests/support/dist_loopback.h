// Helpers for the dist layer's tests on loopback: ports, a rank's launcher
// environment, a rank whose process ends, and the text of an error.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "dist/launch_env.h"
#include "dist/tcp_store.h"

namespace gpemu::dist::testing {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A port no one listens on now (the kernel's pick, released).
inline int free_port() {
  TcpStoreServer s("127.0.0.1", 0);
  return s.port();
}

// Rank `rank` of `world` under torchrun, its store at 127.0.0.1:`port`.
inline LaunchEnv loopback_env(int rank, int world, int port) {
  LaunchEnv e;
  e.launcher = "torchrun";
  e.rank = rank;
  e.world_size = world;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  return e;
}

// A connection to 127.0.0.1:`port`.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// A store client of rank `rank` (one digit) whose connection just closes, as a killed process's does.
inline void a_rank_process_ends(int store_port, char rank) {
  const int fd = connect_to(store_port);
  const char hello[] = {'H', 0, 0, 0, 0, 1, 0, 0, 0, rank};
  EXPECT_EQ(::send(fd, hello, sizeof hello, 0), static_cast<ssize_t>(sizeof hello));
  ::close(fd);
}

}  // namespace gpemu::dist::testing

// `gpemu prep serve`: the preprocessing service over TCP (prep_serve.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/option_checks.h"
#include "gpemu/prep_serve.h"

namespace gpemu::cli {
namespace {

struct PrepServeArgs {
  prep::PrepServerOptions o;
  double idle_timeout_s = 600;
};

void prep_serve(PrepServeArgs a) {
  a.o.idle_timeout = ns_from_double(a.idle_timeout_s * 1e9, a.idle_timeout_s, "s");
  prep::PrepServer server(a.o);
  std::string pids;
  for (const prep::PrepWorkerInfo& w : server.workers())
    pids += fmt::format("{}{} (port {}, cores {})", pids.empty() ? "" : ", ", w.pid, w.port, fmt::join(w.cpus, ","));
  std::cout << fmt::format("gpemu prep serve: listening on {}:{} (protocol version {}), {} worker{} of {} CPU{}: {}\n",
                           a.o.host, server.port(), prep::kProtocolVersion, a.o.workers, a.o.workers == 1 ? "" : "s",
                           a.o.cpus_per_worker, a.o.cpus_per_worker == 1 ? "" : "s", pids);
  if (!server.cpu_note().empty()) std::cout << "note: " << server.cpu_note() << '\n';
  if (a.o.host.rfind("127.", 0) != 0 && a.o.host != "::1" && a.o.host != "localhost")
    std::cout << "note: --host " << a.o.host
              << " may be reachable from other machines; the service has no authentication and no encryption\n";
  std::cout.flush();
  server.run();
}

}  // namespace

void add_prep_command(CLI::App& app) {
  auto* prep = app.add_subcommand("prep", "Disaggregated preprocessing: a service that runs the input pipeline");
  prep->require_subcommand(1);
  auto a = std::make_shared<PrepServeArgs>();
  auto* cmd = prep->add_subcommand(
      "serve",
      "Serve the input pipeline over TCP as tf.data service does: a dispatcher and worker processes that read, "
      "decode and batch a JPEG folder for `gpemu train --clock real --prep-service HOST:PORT` (docs/pipeline.md)");
  cmd->add_option("--port", a->o.port, "TCP port of the dispatcher (0: any free one, printed)")
      ->capture_default_str()
      ->check(whole_number_in(0, 65535));
  cmd->add_option("--host", a->o.host,
                  "Address to listen on (default loopback; 0.0.0.0 serves other machines, with no authentication)")
      ->capture_default_str();
  cmd->add_option("--workers", a->o.workers, "Worker processes")
      ->capture_default_str()
      ->check(whole_number_in(1, 1024));
  cmd->add_option("--worker-cpus", a->o.cpus_per_worker, "CPU cores each worker is pinned to and decodes with")
      ->capture_default_str()
      ->check(whole_number_in(1, 1024));
  cmd->add_option("--idle-timeout-s", a->idle_timeout_s, "Close a connection silent this long, s")
      ->capture_default_str()
      ->check(finite_number_in(0.01, 1e7));
  cmd->callback([a] { prep_serve(*a); });
}

}  // namespace gpemu::cli

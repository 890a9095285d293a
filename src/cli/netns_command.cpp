// `gpemu netns up|down|show`: network namespaces standing for the nodes of a
// real multi-node run on one machine (src/netns/netns.h; docs/interconnect.md,
// "Real nodes on one machine").
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "gpemu/error.h"
#include "netns/netns.h"

namespace gpemu::cli {
namespace {

struct NetnsArgs {
  std::string prefix = netns::kDefaultPrefix;
  int nodes = 2;
  std::string bandwidth = "10Gbit", latency = "0";
  bool json = false;
};

nlohmann::json layout_json(const netns::NetnsLayout& l) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : l.nodes)
    nodes.push_back({{"netns", n.netns}, {"interface", n.node_veth}, {"address", n.address}});
  return {{"prefix", l.prefix},
          {"bridge", l.bridge},
          {"subnet", netns::kSubnet},
          {"bandwidth_bit_s", l.bandwidth_bit_s},
          {"latency_us", static_cast<double>(l.latency_ns) / 1000.0},
          {"nodes", nodes}};
}

std::string bandwidth_text(std::uint64_t bit_s) {
  if (bit_s % 1'000'000'000 == 0) return fmt::format("{} Gbit/s", bit_s / 1'000'000'000);
  if (bit_s % 1'000'000 == 0) return fmt::format("{} Mbit/s", bit_s / 1'000'000);
  return fmt::format("{} kbit/s", static_cast<double>(bit_s) / 1e3);
}

void print_layout(const netns::NetnsLayout& l, bool json) {
  if (json) {
    std::cout << layout_json(l).dump(2) << '\n';
    return;
  }
  std::cout << fmt::format(
      "gpemu netns: {} node{} (prefix {}) on bridge {}: {} each way per node, {} us one way between two nodes\n",
      l.nodes.size(), l.nodes.size() == 1 ? "" : "s", l.prefix, l.bridge, bandwidth_text(l.bandwidth_bit_s),
      static_cast<double>(l.latency_ns) / 1000.0);
  Table t({"node", "namespace", "interface", "address"});
  for (std::size_t i = 0; i < l.nodes.size(); ++i)
    t.add({std::to_string(i), l.nodes[i].netns, l.nodes[i].node_veth, l.nodes[i].address});
  t.print(std::cout);
  std::cout << fmt::format(
      "Run a node's rank in it: ip netns exec {}-<node> COMMAND (MASTER_ADDR={}). Remove them: gpemu netns down{}\n",
      l.prefix, l.nodes.front().address, l.prefix == netns::kDefaultPrefix ? "" : " --prefix " + l.prefix);
}

}  // namespace

void add_netns_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "netns", "Network namespaces joined by shaped veth links: the nodes of a real multi-node run on one machine");
  cmd->require_subcommand(1);
  auto a = std::make_shared<NetnsArgs>();

  auto* up = cmd->add_subcommand("up", "Make N namespaces on a bridge, each link shaped with tc (root)");
  up->add_option("--nodes", a->nodes, "Namespaces (nodes), 1 to 254")->capture_default_str();
  up->add_option("--bandwidth", a->bandwidth, "Each node's link, each way: e.g. 10Gbit, 100mbit (bits)")
      ->capture_default_str();
  up->add_option("--latency", a->latency, "One way between two nodes: e.g. 50us, 1ms (needs netem), or 0")
      ->capture_default_str();
  up->add_option("--prefix", a->prefix, "Names: <prefix>-<node>, <prefix>-br, ...")->capture_default_str();
  up->add_flag("--json", a->json, "Machine-readable output");
  up->callback([a] {
    netns::NetnsSpec spec;
    spec.prefix = a->prefix;
    spec.nodes = a->nodes;
    spec.bandwidth_bit_s = netns::parse_bandwidth(a->bandwidth);
    spec.latency_ns = netns::parse_latency(a->latency);
    const auto l = netns::netns_up(spec, netns::default_state_dir(),
                                   [](const std::string& line) { std::cerr << "gpemu netns: " << line << '\n'; });
    print_layout(l, a->json);
  });

  auto* down = cmd->add_subcommand("down", "Remove what `gpemu netns up` made (root)");
  down->add_option("--prefix", a->prefix, "The prefix given to up")->capture_default_str();
  down->callback([a] {
    const auto removed = netns::netns_down(a->prefix, netns::default_state_dir());
    std::cout << "gpemu netns: removed";
    for (const auto& name : removed) std::cout << ' ' << name;
    if (removed.empty()) std::cout << " nothing (it was gone already)";
    std::cout << '\n';
  });

  auto* show = cmd->add_subcommand("show", "Print what `gpemu netns up` made");
  show->add_option("--prefix", a->prefix, "The prefix given to up")->capture_default_str();
  show->add_flag("--json", a->json, "Machine-readable output");
  show->callback([a] {
    const auto l = netns::read_state(a->prefix, netns::default_state_dir());
    if (!l) throw InputError(fmt::format("netns show: nothing of prefix '{}' is up", a->prefix));
    print_layout(*l, a->json);
  });
}

}  // namespace gpemu::cli

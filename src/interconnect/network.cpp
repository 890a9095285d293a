// Network presets and the JSON file form of a NetworkSpec. Figures and their
// sources: docs/interconnect.md, "Network".
#include <cmath>

#include <fmt/format.h>

#include "common/json_spec_file.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "gpemu/spec_error.h"

namespace gpemu {
namespace {

// Payload share of the line rate once framing is paid.
// TCP over Ethernet, 1500-byte MTU: 1448 payload bytes (1500 - IPv4 20 - TCP
// 20 - timestamps 12) per 1538 bytes on the wire (+ Ethernet 14, FCS 4,
// preamble 8, inter-frame gap 12).
constexpr double kTcp1500Payload = 1448.0 / 1538.0;
// RoCEv2, 4096-byte MTU: 4096 payload bytes per 4096 + BTH 12 + UDP 8 + IPv4
// 20 + ICRC 4 + Ethernet 14 + FCS 4 + preamble 8 + gap 12 = 4178 on the wire.
constexpr double kRoce4096Payload = 4096.0 / 4178.0;
// NCCL's tuning model charges 9.6 us per network step of a Ring/Simple
// collective (hwLat[NET][Ring][Simple], src/graph/tuning.cc).
constexpr Duration kNetStepLatency = 10 * kMicrosecond;

NetworkSpec preset(std::string name, double gbps, double fraction, std::string source) {
  NetworkSpec n;
  n.name = std::move(name);
  n.line_rate_gbps = gbps;
  n.achievable_fraction = fraction;
  n.latency = kNetStepLatency;
  n.source = std::move(source);
  return n;
}

const std::vector<NetworkSpec>& presets() {
  static const std::vector<NetworkSpec> all = {
      preset("10gbe", 10, kTcp1500Payload,
             "IEEE 802.3ae 10 Gb/s; TCP with 1500-byte MTU framing (the sockets gloo and most data servers use); "
             "NCCL hwLat NET step latency"),
      preset("25gbe", 25, kTcp1500Payload,
             "IEEE 802.3by 25 Gb/s; NCCL socket transport (TCP, 1500-byte MTU framing); NCCL hwLat NET step latency"),
      preset("100gbe", 100, kRoce4096Payload,
             "IEEE 802.3 100 Gb/s; RoCEv2 with 4096-byte MTU framing; NCCL hwLat NET step latency"),
      preset("400gbe", 400, kRoce4096Payload,
             "IEEE 802.3bs 400 Gb/s; RoCEv2 with 4096-byte MTU framing; NCCL hwLat NET step latency"),
  };
  return all;
}

}  // namespace

std::vector<std::string_view> network_presets() {
  std::vector<std::string_view> names;
  for (const NetworkSpec& n : presets()) names.push_back(n.name);
  return names;
}

NetworkSpec network_preset(std::string_view name) {
  for (const NetworkSpec& n : presets())
    if (n.name == name) return n;
  throw InputError(
      fmt::format("network '{}': accepted presets are 10gbe, 25gbe, 100gbe, 400gbe, or a JSON file", name));
}

NetworkSpec load_network_file(const std::string& path) {
  const JsonSpecFile j("network file", path,
                       {"name", "line_rate_gbps", "achievable_fraction", "latency_us", "nics_per_node",
                        "switch_oversubscription", "source"},
                       "a preset (10gbe, 25gbe, 100gbe, 400gbe)");
  NetworkSpec n;
  n.name = j.text("name", path);
  n.line_rate_gbps = j.number("line_rate_gbps", true, 0, 0, 1e5, true);
  n.achievable_fraction = j.number("achievable_fraction", true, 0, 0, 1, true);
  n.latency = static_cast<Duration>(std::llround(j.number("latency_us", true, 0, 0, 1e6) * kMicrosecond));
  n.nics_per_node = static_cast<int>(j.whole("nics_per_node", false, 1, 1, 64));
  n.switch_oversubscription = j.number("switch_oversubscription", false, 1, 1, 1000);
  n.source = j.text("source", fmt::format("user file {}", path));
  return n;
}

NetworkSpec parse_network(std::string_view preset_or_file) {
  for (const NetworkSpec& n : presets())
    if (n.name == preset_or_file) return n;
  if (preset_or_file.empty())
    throw SpecError("cluster.network", "", "is empty: give 10gbe, 25gbe, 100gbe, 400gbe or a JSON file");
  return load_network_file(std::string(preset_or_file));
}

}  // namespace gpemu

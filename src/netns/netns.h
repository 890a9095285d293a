// Network namespaces on one machine standing for the nodes of a real
// multi-node run (`gpemu netns up|down|show`, docs/interconnect.md, "Real
// nodes on one machine"): N namespaces, each with one veth pair whose other
// end hangs off one bridge in the host's namespace, both ends shaped with tc
// (an HTB class at the given rate, and netem's delay where a latency is
// given), so that the packets of gpemu's ranks between two namespaces cross
// a link of the given bandwidth and latency.
//
//   node i: namespace "<prefix>-<i>", veth "<prefix>-v<i>" inside (address
//   10.213.0.<i+1>/24), its peer "<prefix>-h<i>" on the bridge "<prefix>-br"
//
// The host's namespace gets no address and no route: nothing on the machine
// can reach the nodes but processes started inside them (`ip netns exec`).
// Every object made is written to a state file (<state dir>/<prefix>.json)
// before it is made, so that `down`, or the next `up` after a crash, removes
// exactly those and never anything else of the same name that gpemu did not
// make (which `up` refuses to replace).
//
// Needs root (CAP_NET_ADMIN) and iproute2's ip and tc on $PATH; the programs
// run with argument vectors (tool.h), never through a shell.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::netns {

inline constexpr int kMaxNodes = 254;                                                   // one /24 of addresses
inline constexpr std::uint64_t kMinBandwidth = 8'000, kMaxBandwidth = 400'000'000'000;  // bit/s
inline constexpr std::int64_t kMaxLatencyNs = 10'000'000'000;                           // 10 s
inline constexpr const char* kDefaultPrefix = "gpemu";
inline constexpr const char* kSubnet = "10.213.0.0/24";

// "10Gbit", "100mbit", "500kbit", "2500000bit" (tc's bit units, any case;
// a decimal number) to bits per second. InputError naming `what`, the value
// and the accepted forms and range otherwise.
std::uint64_t parse_bandwidth(std::string_view text, std::string_view what = "--bandwidth");
// "50us", "1ms", "0.5ms", "0" to nanoseconds (whole microseconds); InputError otherwise.
std::int64_t parse_latency(std::string_view text, std::string_view what = "--latency");
// Checks a prefix: a lower-case letter, then up to 9 letters or digits.
void check_prefix(std::string_view prefix);

struct NetnsSpec {
  std::string prefix = kDefaultPrefix;
  int nodes = 2;
  std::uint64_t bandwidth_bit_s = 10'000'000'000;
  std::int64_t latency_ns = 0;  // one way, node to node; each veth end's egress delays half of it
};

struct NetnsNode {
  std::string netns, host_veth, node_veth, address;  // address without the /24
};

// What `up` makes (and the state file records).
struct NetnsLayout {
  std::string prefix, bridge;
  std::vector<NetnsNode> nodes;
  std::uint64_t bandwidth_bit_s = 0;
  std::int64_t latency_ns = 0;
};

// The names and addresses for `spec`; InputError for a bad prefix, node
// count, bandwidth or latency.
NetnsLayout plan_netns(const NetnsSpec& spec);

// Root and ip and tc on $PATH, else InputError in one line saying what is missing.
void check_netns_allowed();
// Why this machine cannot make namespaces and bridges, or "" when it can:
// tried (a namespace "<prefix>-probe" and a bridge "<prefix>-pb", removed
// at once), not assumed, since a container may refuse them even to root.
// For tests, which skip with the reason.
std::string netns_refused(const std::string& prefix);

// /run/gpemu/netns: on a tmpfs that a reboot empties, as it empties the namespaces.
std::filesystem::path default_state_dir();

// Makes the layout. A state file of the same prefix (a crashed or never
// downed run) is cleaned first: `said` hears one line per object removed. A
// namespace or link of a planned name that no state file lists is refused
// (InputError naming it), and left alone. On a failure everything made so
// far is removed again and the error names the command and tc's or ip's reason.
NetnsLayout netns_up(const NetnsSpec& spec, const std::filesystem::path& state_dir,
                     const std::function<void(const std::string&)>& said = {});

// Removes what the prefix's state file lists (those that still exist) and
// the file; returns the names removed. InputError when there is no state file.
std::vector<std::string> netns_down(std::string_view prefix, const std::filesystem::path& state_dir);

// The prefix's state file, or nullopt when there is none; InputError for a damaged one.
std::optional<NetnsLayout> read_state(std::string_view prefix, const std::filesystem::path& state_dir);

// Whether a namespace / a link in this process's namespace of that name exists now.
bool netns_exists(const std::string& name);
bool link_exists(const std::string& name);

}  // namespace gpemu::netns

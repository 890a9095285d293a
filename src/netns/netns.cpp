#include "netns/netns.h"

#include <net/if.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/folder_lock.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "netns/tool.h"

namespace gpemu::netns {
namespace fs = std::filesystem;
namespace {

// User text in a message: printable and short.
std::string shown(std::string_view text) { return printable_excerpt(text, 64); }

// What ip or tc said, as one line without its trailing newline.
std::string said_line(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return one_line_message(text);
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// The number at the front of `text` and the unit after it; false when there is no number.
bool split_number(std::string_view text, double& value, std::string& unit) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  const std::string number(text.substr(0, i));
  if (number.find('.') != number.rfind('.') || number == ".") return false;
  value = std::strtod(number.c_str(), nullptr);
  unit = lower(text.substr(i));
  return std::isfinite(value);
}

fs::path state_file(std::string_view prefix, const fs::path& dir) { return dir / (std::string(prefix) + ".json"); }

void run_or_throw(const std::vector<std::string>& argv) {
  const ToolResult r = run_tool(argv);
  if (r.status != 0) {
    std::string reason = r.err.empty() ? r.out : r.err;
    while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back()))) reason.pop_back();
    if (reason.empty()) reason = fmt::format("exit status {}", r.status);
    throw InputError(fmt::format("netns: '{}' failed: {}", command_line(argv), one_line_message(reason)));
  }
}

std::string rate_word(std::uint64_t bit_s) { return std::to_string(bit_s) + "bit"; }

// tc: the HTB class that holds the link's rate, and netem's delay under it.
void shape(const std::string& netns_name, const std::string& dev, const NetnsLayout& l) {
  std::vector<std::string> tc = {"tc"};
  if (!netns_name.empty()) tc.insert(tc.end(), {"-n", netns_name});
  auto with = [&](std::initializer_list<std::string> rest) {
    std::vector<std::string> v = tc;
    v.insert(v.end(), rest);
    return v;
  };
  run_or_throw(with({"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"}));
  // One class: the quantum only matters between classes; a fixed one keeps
  // tc from warning at high rates.
  run_or_throw(with({"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                     rate_word(l.bandwidth_bit_s), "ceil", rate_word(l.bandwidth_bit_s), "quantum", "60000"}));
  if (l.latency_ns == 0) return;
  const std::string half = fmt::format("{}us", static_cast<double>(l.latency_ns) / 2000.0);
  const auto args =
      with({"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem", "delay", half, "limit", "100000"});
  const ToolResult r = run_tool(args);
  if (r.status == 0) return;
  if (r.err.find("qdisc kind is unknown") != std::string::npos)
    throw InputError(
        fmt::format("netns: --latency {} us needs tc's netem qdisc, which this kernel does not have ('{}': {}); "
                    "give --latency 0 to shape the bandwidth alone, or load the sch_netem module",
                    l.latency_ns / 1000, command_line(args), said_line(r.err)));
  run_or_throw(args);
}

// Removes what `l` lists that exists; the names removed, in order.
std::vector<std::string> remove_layout(const NetnsLayout& l) {
  std::vector<std::string> removed;
  std::string failures;
  auto attempt = [&](const std::vector<std::string>& argv, const std::string& name) {
    const ToolResult r = run_tool(argv);
    if (r.status == 0) {
      removed.push_back(name);
    } else if (argv[1] == "link" && !link_exists(name)) {
      // A namespace is destroyed after `ip netns del` returns, its veth pair
      // with it: gone before we got to it.
    } else {
      if (!failures.empty()) failures += "; ";
      failures += fmt::format("'{}': {}", command_line(argv), said_line(r.err));
    }
  };
  for (const NetnsNode& n : l.nodes) {
    if (netns_exists(n.netns)) attempt({"ip", "netns", "del", n.netns}, n.netns);
    // A process still inside the namespace keeps it (and its veth) alive
    // after its name is gone: the host end is removed with its peer.
    if (link_exists(n.host_veth)) attempt({"ip", "link", "del", n.host_veth}, n.host_veth);
    if (link_exists(n.node_veth)) attempt({"ip", "link", "del", n.node_veth}, n.node_veth);  // not yet moved
  }
  if (link_exists(l.bridge)) attempt({"ip", "link", "del", l.bridge}, l.bridge);
  if (!failures.empty()) throw InputError("netns: could not remove everything it made: " + failures);
  return removed;
}

nlohmann::json to_json(const NetnsLayout& l) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const NetnsNode& n : l.nodes)
    nodes.push_back(
        {{"netns", n.netns}, {"host_veth", n.host_veth}, {"node_veth", n.node_veth}, {"address", n.address}});
  return {{"prefix", l.prefix},         {"bridge", l.bridge},
          {"subnet", kSubnet},          {"bandwidth_bit_s", l.bandwidth_bit_s},
          {"latency_ns", l.latency_ns}, {"nodes", nodes}};
}

void write_state(const NetnsLayout& l, const fs::path& dir) {
  write_file_atomically(state_file(l.prefix, dir), to_json(l).dump(2) + "\n", "netns state file", true);
}

}  // namespace

namespace {

struct Unit {
  std::string_view name;
  double scale;
};

// A number and one of `units` (lower case; the text in any case) to the
// number times the unit's scale; InputError naming `what` and `noun` otherwise.
double scaled(std::string_view text, std::string_view what, std::string_view noun, const std::string& accepted,
              std::initializer_list<Unit> units) {
  double value = 0;
  std::string unit;
  if (!split_number(text, value, unit))
    throw InputError(fmt::format("{} '{}': not a {}; {}", what, shown(text), noun, accepted));
  for (const Unit& u : units)
    if (unit == u.name) return value * u.scale;
  // tc reads bps as bytes per second: a user who means bits would be 8x off.
  const std::string hint = unit.find("bps") != std::string::npos || unit.find("b/s") != std::string::npos
                               ? " (tc reads bps as bytes per second: gpemu takes bits only)"
                               : "";
  throw InputError(
      fmt::format("{} '{}': unit '{}' is not accepted{}; {}", what, shown(text), shown(unit), hint, accepted));
}

}  // namespace

std::uint64_t parse_bandwidth(std::string_view text, std::string_view what) {
  const std::string accepted =
      "give a number and a unit, bit, kbit, mbit, gbit or tbit (any case, k = 1000), from 8kbit to 400gbit, e.g. "
      "10Gbit";
  const double bits = std::round(scaled(text, what, "bandwidth", accepted,
                                        {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}}));
  if (!(bits >= static_cast<double>(kMinBandwidth) && bits <= static_cast<double>(kMaxBandwidth)))
    throw InputError(fmt::format("{} '{}': out of range; {}", what, shown(text), accepted));
  return static_cast<std::uint64_t>(bits);
}

std::int64_t parse_latency(std::string_view text, std::string_view what) {
  const std::string accepted =
      "give 0 or a number and a unit, us, ms or s, in whole microseconds up to 10 s, e.g. 50us";
  if (text == "0") return 0;
  const double ns = scaled(text, what, "latency", accepted, {{"us", 1e3}, {"ms", 1e6}, {"s", 1e9}});
  if (!(ns <= static_cast<double>(kMaxLatencyNs)) || std::fmod(ns, 1000.0) != 0)
    throw InputError(fmt::format("{} '{}': {}; {}", what, shown(text),
                                 ns > static_cast<double>(kMaxLatencyNs) ? "out of range" : "not whole microseconds",
                                 accepted));
  return static_cast<std::int64_t>(ns);
}

void check_prefix(std::string_view prefix) {
  bool ok = !prefix.empty() && prefix.size() <= 10 && std::islower(static_cast<unsigned char>(prefix[0]));
  for (char c : prefix)
    ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)));
  if (!ok)
    throw InputError(
        fmt::format("--prefix '{}': give a lower-case letter and up to 9 more letters or digits (interface names "
                    "'<prefix>-h<node>' must fit Linux's 15 characters)",
                    shown(prefix)));
}

NetnsLayout plan_netns(const NetnsSpec& spec) {
  check_prefix(spec.prefix);
  if (spec.nodes < 1 || spec.nodes > kMaxNodes)
    throw InputError(
        fmt::format("--nodes {}: give 1 to {} (the nodes' addresses are one /24, {})", spec.nodes, kMaxNodes, kSubnet));
  if (spec.bandwidth_bit_s < kMinBandwidth || spec.bandwidth_bit_s > kMaxBandwidth)
    throw InputError(
        fmt::format("--bandwidth {} bit/s: give {} to {} bit/s", spec.bandwidth_bit_s, kMinBandwidth, kMaxBandwidth));
  if (spec.latency_ns < 0 || spec.latency_ns > kMaxLatencyNs || spec.latency_ns % 1000 != 0)
    throw InputError(fmt::format("--latency {} ns: give whole microseconds from 0 to 10 s", spec.latency_ns));
  NetnsLayout l;
  l.prefix = spec.prefix;
  l.bridge = spec.prefix + "-br";
  l.bandwidth_bit_s = spec.bandwidth_bit_s;
  l.latency_ns = spec.latency_ns;
  for (int i = 0; i < spec.nodes; ++i) {
    const std::string n = std::to_string(i);
    l.nodes.push_back(
        {spec.prefix + "-" + n, spec.prefix + "-h" + n, spec.prefix + "-v" + n, "10.213.0." + std::to_string(i + 1)});
  }
  return l;
}

void check_netns_allowed() {
  if (::geteuid() != 0)
    throw InputError(
        "netns: needs root (network namespaces, veth links and tc shaping need CAP_NET_ADMIN); run it with sudo");
  for (const char* tool : {"ip", "tc"})
    if (!on_path(tool))
      throw InputError(
          fmt::format("netns: '{}' is not on $PATH; install iproute2 (Debian: apt-get install iproute2) or add its "
                      "folder (/usr/sbin) to PATH",
                      tool));
}

std::string netns_refused(const std::string& prefix) {
  if (::geteuid() != 0) return "needs root to make network namespaces";
  if (!on_path("ip") || !on_path("tc")) return "needs iproute2's ip and tc on PATH";
  const std::string probe = prefix + "-probe";
  const ToolResult r = run_tool({"ip", "netns", "add", probe});
  if (r.status != 0) return "this machine refuses `ip netns add`: " + said_line(r.err);
  run_tool({"ip", "netns", "del", probe});
  const ToolResult b = run_tool({"ip", "link", "add", prefix + "-pb", "type", "bridge"});
  if (b.status != 0) return "this machine refuses a bridge: " + said_line(b.err);
  run_tool({"ip", "link", "del", prefix + "-pb"});
  return "";
}

fs::path default_state_dir() { return "/run/gpemu/netns"; }

bool netns_exists(const std::string& name) {
  std::error_code ec;
  return fs::exists(fs::path("/run/netns") / name, ec);
}

bool link_exists(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

std::optional<NetnsLayout> read_state(std::string_view prefix, const fs::path& state_dir) {
  check_prefix(prefix);
  const fs::path file = state_file(prefix, state_dir);
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const std::string own = std::string(prefix) + "-";
  auto damaged = [&](const std::string& why) {
    return InputError(
        fmt::format("netns state file '{}': {}; remove what it made by hand (ip netns del, ip link del) "
                    "and then the file",
                    file.string(), why));
  };
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    NetnsLayout l;
    l.prefix = j.at("prefix").get<std::string>();
    l.bridge = j.at("bridge").get<std::string>();
    l.bandwidth_bit_s = j.at("bandwidth_bit_s").get<std::uint64_t>();
    l.latency_ns = j.at("latency_ns").get<std::int64_t>();
    for (const auto& n : j.at("nodes"))
      l.nodes.push_back({n.at("netns").get<std::string>(), n.at("host_veth").get<std::string>(),
                         n.at("node_veth").get<std::string>(), n.at("address").get<std::string>()});
    // Only names of its own prefix: a state file never makes gpemu remove anything else.
    bool own_names = l.prefix == prefix && l.bridge.rfind(own, 0) == 0;
    for (const NetnsNode& n : l.nodes)
      own_names =
          own_names && n.netns.rfind(own, 0) == 0 && n.host_veth.rfind(own, 0) == 0 && n.node_veth.rfind(own, 0) == 0;
    if (!own_names) throw damaged(fmt::format("it names objects outside the prefix '{}-'", prefix));
    return l;
  } catch (const nlohmann::json::exception& e) {
    throw damaged(one_line_message(e.what()));
  }
}

NetnsLayout netns_up(const NetnsSpec& spec, const fs::path& state_dir,
                     const std::function<void(const std::string&)>& said) {
  const NetnsLayout l = plan_netns(spec);
  check_netns_allowed();
  FolderLock lock(state_dir);
  if (const auto old = read_state(l.prefix, state_dir)) {
    for (const std::string& name : remove_layout(*old))
      if (said) said(fmt::format("removed {}, left by an earlier `gpemu netns up` that was not taken down", name));
    fs::remove(state_file(l.prefix, state_dir));
  }
  auto foreign = [&](const std::string& what, const std::string& name, const std::string& remove) {
    return InputError(
        fmt::format("netns: {} '{}' exists and no gpemu netns state file lists it: gpemu leaves it alone; remove it "
                    "({} {}) or give another --prefix",
                    what, name, remove, name));
  };
  if (link_exists(l.bridge)) throw foreign("link", l.bridge, "ip link del");
  for (const NetnsNode& n : l.nodes) {
    if (netns_exists(n.netns)) throw foreign("network namespace", n.netns, "ip netns del");
    for (const std::string* link : {&n.host_veth, &n.node_veth})
      if (link_exists(*link)) throw foreign("link", *link, "ip link del");
  }
  // Recorded before anything is made: a crash at any point leaves a file
  // that lists everything this run could have made.
  write_state(l, state_dir);
  try {
    run_or_throw({"ip", "link", "add", l.bridge, "type", "bridge"});
    run_or_throw({"ip", "link", "set", l.bridge, "up"});
    for (const NetnsNode& n : l.nodes) {
      run_or_throw({"ip", "netns", "add", n.netns});
      run_or_throw({"ip", "link", "add", n.host_veth, "type", "veth", "peer", "name", n.node_veth});
      run_or_throw({"ip", "link", "set", n.node_veth, "netns", n.netns});
      run_or_throw({"ip", "link", "set", n.host_veth, "master", l.bridge});
      run_or_throw({"ip", "link", "set", n.host_veth, "up"});
      run_or_throw({"ip", "-n", n.netns, "addr", "add", n.address + "/24", "dev", n.node_veth});
      run_or_throw({"ip", "-n", n.netns, "link", "set", n.node_veth, "up"});
      run_or_throw({"ip", "-n", n.netns, "link", "set", "lo", "up"});
      shape("", n.host_veth, l);       // what the node receives
      shape(n.netns, n.node_veth, l);  // what it sends
    }
  } catch (...) {
    try {
      remove_layout(l);
      fs::remove(state_file(l.prefix, state_dir));
    } catch (const std::exception&) {  // the state file stays: the next up or down retries
    }
    throw;
  }
  return l;
}

std::vector<std::string> netns_down(std::string_view prefix, const fs::path& state_dir) {
  check_prefix(prefix);
  check_netns_allowed();
  FolderLock lock(state_dir);
  const auto l = read_state(prefix, state_dir);
  if (!l)
    throw InputError(
        fmt::format("netns down: no state file '{}': nothing of prefix '{}' to remove (`gpemu "
                    "netns up` writes it)",
                    state_file(prefix, state_dir).string(), prefix));
  std::vector<std::string> removed = remove_layout(*l);
  fs::remove(state_file(prefix, state_dir));
  return removed;
}

}  // namespace gpemu::netns

// The cluster file of `gpemu cluster` (cluster.h): JSON, every key checked.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpemu/cluster.h"
#include "gpemu/error.h"
#include "gpemu/interconnect.h"
#include "share/json_fields.h"

namespace gpemu::cluster {
namespace {

constexpr std::size_t kMaxFileBytes = 16u << 20;
constexpr int kMaxNodes = 1'000'000;

const std::set<std::string, std::less<>> kTopKeys = {"nodes", "network", "checkpoint_gib", "storage_gb_per_s",
                                                     "job_start_s"};
const std::set<std::string, std::less<>> kNodeKeys = {"name",     "gpu",   "gpus", "cpus",
                                                      "dram_gib", "count", "rack", "decode_us"};

std::string joined(const std::set<std::string, std::less<>>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

std::string gpu_ids() {
  std::string s;
  for (const auto& g : gpu_catalog()) s += (s.empty() ? "" : ", ") + g.id;
  return s;
}

NodeSpec parse_node(const nlohmann::json& j, std::size_t i, std::string_view source) {
  using namespace share_detail;
  const std::string where = fmt::format("{}: node {}", source, i + 1);
  if (!j.is_object()) bad_field(where, j, "an object with the keys " + joined(kNodeKeys));
  for (const auto& [key, value] : j.items())
    if (!kNodeKeys.contains(key))
      throw InputError(fmt::format("{}: unknown key '{}'; a node takes {}", where, key, joined(kNodeKeys)));
  NodeSpec n;
  n.name = fmt::format("node{}", i + 1);
  if (auto it = j.find("name"); it != j.end()) n.name = text_field(where + ", 'name'", *it);
  const std::string at = fmt::format("{}: node {} ('{}')", source, i + 1, n.name);
  auto it = j.find("gpu");
  if (it == j.end())
    throw InputError(fmt::format("{}: 'gpu' is missing: give a GPU of the catalog ({})", at, gpu_ids()));
  const std::string gpu = text_field(at + ", 'gpu'", *it);
  n.gpu = try_find_gpu(gpu);
  if (!n.gpu)
    throw InputError(
        fmt::format("{}, 'gpu': '{}' is not in the catalog; accepted: {} (gpemu devices)", at, gpu, gpu_ids()));
  if (auto g = j.find("gpus"); g != j.end())
    n.gpus = static_cast<int>(integer_field(at + ", 'gpus'", *g, 1, kMaxGpusPerNode));
  if (auto c = j.find("cpus"); c != j.end()) n.cpus = static_cast<int>(integer_field(at + ", 'cpus'", *c, 1, 4096));
  if (auto d = j.find("dram_gib"); d != j.end()) n.dram_gib = number_field(at + ", 'dram_gib'", *d, 0, 1 << 20, true);
  if (auto c = j.find("count"); c != j.end())
    n.count = static_cast<int>(integer_field(at + ", 'count'", *c, 1, kMaxNodes));
  if (auto d = j.find("decode_us"); d != j.end()) n.decode_us = number_field(at + ", 'decode_us'", *d, 0, 1e7);
  if (auto r = j.find("rack"); r != j.end())
    n.rack = static_cast<int>(integer_field(at + ", 'rack'", *r, 0, kMaxNodes));
  return n;
}

}  // namespace

int ClusterConfig::total_gpus() const {
  long long g = 0;
  for (const auto& n : nodes) g += static_cast<long long>(n.gpus) * n.count;
  return static_cast<int>(g);
}

int ClusterConfig::total_nodes() const {
  long long c = 0;
  for (const auto& n : nodes) c += n.count;
  return static_cast<int>(c);
}

ClusterConfig parse_cluster(std::string_view text, std::string_view source) {
  using namespace share_detail;
  if (text.size() > kMaxFileBytes)
    throw InputError(fmt::format("{}: {} bytes is too large for a cluster file (at most {} MiB)", source, text.size(),
                                 kMaxFileBytes >> 20));
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON ({}); a cluster file is an object with 'nodes'", source, e.what()));
  }
  if (!root.is_object()) bad_field(std::string(source), root, "an object with the keys " + joined(kTopKeys));
  for (const auto& [key, value] : root.items())
    if (!kTopKeys.contains(key))
      throw InputError(fmt::format("{}: unknown key '{}'; a cluster file takes {}", source, key, joined(kTopKeys)));
  auto nodes = root.find("nodes");
  if (nodes == root.end() || !nodes->is_array() || nodes->empty())
    throw InputError(
        fmt::format("{}: 'nodes' must be a non-empty list of nodes, e.g. [{{\"gpu\": \"v100\", \"gpus\": 8, "
                    "\"cpus\": 24, \"dram_gib\": 500, \"count\": 2}}]",
                    source));
  ClusterConfig c;
  long long gpus = 0;
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    c.nodes.push_back(parse_node((*nodes)[i], i, source));
    gpus += static_cast<long long>(c.nodes.back().gpus) * c.nodes.back().count;
    if (gpus > 10'000'000)
      throw InputError(fmt::format("{}: more than 10,000,000 GPUs in all; split the cluster", source));
  }
  if (auto n = root.find("network"); n != root.end()) {
    c.network = text_field(fmt::format("{}: 'network'", source), *n);
    network_preset(c.network);  // InputError naming the accepted presets
  }
  if (auto k = root.find("checkpoint_gib"); k != root.end())
    c.checkpoint_gib = number_field(fmt::format("{}: 'checkpoint_gib'", source), *k, 0, 1 << 20);
  if (auto k = root.find("job_start_s"); k != root.end())
    c.job_start_s = number_field(fmt::format("{}: 'job_start_s'", source), *k, 0, 1e6);
  if (auto k = root.find("storage_gb_per_s"); k != root.end())
    c.storage_gb_per_s = number_field(fmt::format("{}: 'storage_gb_per_s'", source), *k, 0, 1e6, true);
  return c;
}

ClusterConfig read_cluster_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(fmt::format("--cluster '{}': cannot be read; give a cluster file (JSON, docs/cluster.md)", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_cluster(ss.str(), path);
}

}  // namespace gpemu::cluster

// Forgiving name matching for GPUs, and the names of precisions.
//
// A name is resolved in this order (docs/catalog.md states the same rules for
// users):
//  1. Normalise: keep letters and digits only, lower-cased, then drop leading
//     vendor/series words ("nvidia", "tesla", "quadro", "amd", "instinct").
//     "NVIDIA Tesla_V100-PCIE-32GB" and "v100pcie32gb" are the same key.
//  2. Exact: the key equals a GPU's normalised id or one of its aliases.
//  3. Partial: the key (2+ characters) begins exactly one GPU's normalised id.
//     When it begins several, the family default below wins if it is among
//     them ("v100-pcie" -> V100-PCIE-32GB); otherwise the name is ambiguous.
//  4. Otherwise the name is unknown, and the error suggests close matches.
// Partial matching is against ids only, never aliases: an alias like
// "NVIDIA A100 80GB PCIe" would otherwise make "A100 80GB" silently mean the
// PCIe card.
#include <algorithm>
#include <cctype>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "gpemu/catalog.h"
#include "gpemu/error.h"

namespace gpemu {
namespace {

// What a bare family name means when several catalogued cards share it. The
// V100, P100 and A100 defaults are the cards GPEmu's published profiles were
// measured on (Tesla_V100-PCIE-32GB, Tesla_P100-PCIE-16GB,
// NVIDIA_A100-SXM4-40GB), so "v100" here means what it meant there. H100 has no
// GPEmu profile; SXM5 is the form in DGX/HGX systems and most clouds.
struct FamilyDefault {
  std::string_view family;  // normalised
  std::string_view id;
};
constexpr FamilyDefault kFamilyDefaults[] = {
    {"p100", "P100-PCIE-16GB"},
    {"v100", "V100-PCIE-32GB"},
    {"a100", "A100-SXM4-40GB"},
    {"h100", "H100-SXM5-80GB"},
};

constexpr std::string_view kVendorPrefixes[] = {"nvidia", "tesla", "quadro", "amd", "instinct"};

constexpr std::size_t kMaxSuggestions = 6;

std::string normalise(std::string_view name) {
  std::string key;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) key += static_cast<char>(std::tolower(u));
  }
  // Repeat so "NVIDIA Tesla T4" and "AMD Instinct MI300X" lose both words; a
  // name that is nothing but a prefix word is kept, so it fails as itself.
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (std::string_view prefix : kVendorPrefixes) {
      if (key.size() > prefix.size() && key.starts_with(prefix)) {
        key.erase(0, prefix.size());
        stripped = true;
      }
    }
  }
  return key;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool is_subsequence(std::string_view needle, std::string_view hay) {
  std::size_t i = 0;
  for (char c : hay) {
    if (i < needle.size() && needle[i] == c) ++i;
  }
  return i == needle.size();
}

// Normalised names of every catalogued GPU, built once next to the catalog.
struct NameIndex {
  struct Entry {
    const GpuSpec* gpu;
    std::string id_key;             // normalised id
    std::string family_key;         // normalised id up to its first '-', e.g. "v100"
    std::vector<std::string> keys;  // id_key and every normalised alias
  };
  std::vector<Entry> entries;

  NameIndex() {
    for (const GpuSpec& gpu : gpu_catalog()) {
      Entry e{&gpu, normalise(gpu.id), normalise(gpu.id.substr(0, gpu.id.find('-'))), {}};
      e.keys.push_back(e.id_key);
      for (const std::string& alias : gpu.aliases) e.keys.push_back(normalise(alias));
      entries.push_back(std::move(e));
    }
  }
};

const NameIndex& name_index() {
  static const NameIndex index;
  return index;
}

// The outcome of resolving one name: a GPU, or the GPUs it could have meant.
struct Resolution {
  const GpuSpec* gpu = nullptr;
  std::vector<const GpuSpec*> ambiguous;
};

Resolution resolve(std::string_view name) {
  const std::string key = normalise(name);
  const NameIndex& index = name_index();
  if (key.empty()) return {};

  for (const auto& e : index.entries) {
    if (std::find(e.keys.begin(), e.keys.end(), key) != e.keys.end()) return {e.gpu, {}};
  }

  if (key.size() < 2) return {};
  std::vector<const GpuSpec*> partial;
  for (const auto& e : index.entries) {
    if (e.id_key.starts_with(key)) partial.push_back(e.gpu);
  }
  if (partial.size() == 1) return {partial.front(), {}};
  if (partial.empty()) return {};
  for (const FamilyDefault& d : kFamilyDefaults) {
    if (!key.starts_with(d.family)) continue;
    for (const GpuSpec* gpu : partial) {
      if (gpu->id == d.id) return {gpu, {}};
    }
  }
  return {nullptr, std::move(partial)};
}

// GPUs whose names are a small edit away from the key (or from their family
// name, so "v1000" finds the V100s), or which contain the key's characters in
// order ("V100 32GB" finds both 32 GB V100s). Closest first.
std::vector<const GpuSpec*> close_matches(std::string_view name) {
  const std::string key = normalise(name);
  const std::size_t threshold = std::max<std::size_t>(1, key.size() / 3);
  struct Scored {
    std::size_t distance;
    std::size_t order;
    const GpuSpec* gpu;
  };
  std::vector<Scored> scored;
  const auto& entries = name_index().entries;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::size_t best = edit_distance(key, e.family_key);
    bool contains = false;
    for (const std::string& k : e.keys) {
      best = std::min(best, edit_distance(key, k));
      contains = contains || (key.size() >= 3 && is_subsequence(key, k));
    }
    if (best <= threshold || contains) scored.push_back({best, i, e.gpu});
  }
  std::sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.order < b.order;
  });
  std::vector<const GpuSpec*> out;
  for (const Scored& s : scored) {
    if (out.size() == kMaxSuggestions) break;
    out.push_back(s.gpu);
  }
  return out;
}

std::string join_ids(const std::vector<const GpuSpec*>& gpus) {
  std::string out;
  for (const GpuSpec* gpu : gpus) {
    if (!out.empty()) out += ", ";
    out += gpu->id;
  }
  return out;
}

}  // namespace

const GpuSpec* try_find_gpu(std::string_view name) { return resolve(name).gpu; }

const GpuSpec& find_gpu(std::string_view name) {
  Resolution r = resolve(name);
  if (r.gpu) return *r.gpu;
  if (!r.ambiguous.empty()) {
    throw InputError(
        fmt::format("ambiguous GPU '{}': it could be {}; name one of them (run 'gpemu devices' for the full list)",
                    name, join_ids(r.ambiguous)));
  }
  std::vector<const GpuSpec*> close = close_matches(name);
  if (close.empty()) {
    std::vector<const GpuSpec*> all;
    for (const GpuSpec& gpu : gpu_catalog()) all.push_back(&gpu);
    throw InputError(fmt::format("unknown GPU '{}': known GPUs are {}", name, join_ids(all)));
  }
  throw InputError(fmt::format("unknown GPU '{}': close matches: {} (run 'gpemu devices' for the full list)", name,
                               join_ids(close)));
}

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::FP8: return "fp8";
  }
  return "unknown";
}

Precision parse_precision(std::string_view s) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // The torch dtype names are accepted too, since users copy them from scripts.
  if (lower == "fp32" || lower == "float32" || lower == "float") return Precision::FP32;
  if (lower == "tf32") return Precision::TF32;
  if (lower == "fp16" || lower == "half" || lower == "float16") return Precision::FP16;
  if (lower == "bf16" || lower == "bfloat16") return Precision::BF16;
  if (lower == "fp8") return Precision::FP8;
  throw InputError(
      fmt::format("unknown precision '{}': expected one of fp32 (float32), tf32, fp16 (half, float16), "
                  "bf16 (bfloat16), fp8",
                  s));
}

}  // namespace gpemu

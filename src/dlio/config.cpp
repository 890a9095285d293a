// DLIO configuration: reading YAML and hydra overrides into DlioWorkload and
// writing the effective configuration back out (its validation is
// validate.cpp's).
#include "gpemu/dlio.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/checked.h"
#include "common/message_text.h"
#include "dlio/enums.h"
#include "dlio/schema.h"
#include "dlio/tree.h"
#include "gpemu/error.h"
#include "gpemu/interconnect/cluster.h"

namespace gpemu::dlio {

using detail::FieldSpec;
using detail::inline_text;
using detail::invalid;
using detail::Node;
using detail::SectionSpec;

// --- Enumerations and small helpers ------------------------------------------

std::string_view to_string(Framework v) { return detail::enum_name(v); }
std::string_view to_string(DataFormat v) { return detail::enum_name(v); }
std::string_view to_string(DataLoaderKind v) { return detail::enum_name(v); }
std::string_view to_string(Shuffle v) { return detail::enum_name(v); }
std::string_view to_string(ReadType v) { return detail::enum_name(v); }
std::string_view to_string(FileAccess v) { return detail::enum_name(v); }
std::string_view to_string(Compression v) { return detail::enum_name(v); }
std::string_view to_string(CheckpointType v) { return detail::enum_name(v); }
std::string_view to_string(CheckpointMode v) { return detail::enum_name(v); }
std::string_view to_string(DataType v) { return detail::enum_name(v); }
std::string_view to_string(Profiler v) { return detail::enum_name(v); }
std::string_view to_string(StorageType v) { return detail::enum_name(v); }
std::string_view to_string(StepTimeSource v) { return detail::enum_name(v); }
std::string_view to_string(Distribution v) { return detail::enum_name(v); }

int bytes_per_element(DataType t) {
  switch (t) {
    case DataType::Fp16:
    case DataType::Bf16: return 2;
    case DataType::Fp32: return 4;
    case DataType::Int8:
    case DataType::Uint8: return 1;
  }
  return 1;
}

std::string cost_model_name(const DlioWorkload& w) { return w.gpemu.model.empty() ? w.model.name : w.gpemu.model; }

StepTimeSource effective_step_time_source(const DlioWorkload& w) {
  if (w.gpemu.step_time != StepTimeSource::Auto) return w.gpemu.step_time;
  return w.gpemu.gpu.empty() ? StepTimeSource::Config : StepTimeSource::CostModel;
}

namespace {

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// Every key name a section accepts (fields, aliases, subsections).
std::vector<std::string> names_of(const SectionSpec& s) {
  std::vector<std::string> out;
  for (const FieldSpec& f : s.fields) out.push_back(f.name);
  for (const SectionSpec& sub : s.sections) {
    out.push_back(sub.name);
    for (const std::string& a : sub.aliases) out.push_back(a);
  }
  return out;
}

// Full paths of every key or section named `key` anywhere in the schema.
void find_everywhere(const SectionSpec& s, std::string_view key, std::vector<std::string>& out) {
  for (const FieldSpec& f : s.fields) {
    if (f.name == key) out.push_back(f.path);
  }
  for (const SectionSpec& sub : s.sections) {
    if (sub.name == key) out.push_back(sub.path);
    find_everywhere(sub, key, out);
  }
}

// --- YAML tree -> DlioWorkload ------------------------------------------------------

class Converter {
 public:
  Converter(DlioWorkload& w, bool strict) : w_(w), strict_(strict) {}

  void section(const SectionSpec& spec, const Node& node, const std::string& shown) {
    if (node.is_null()) return;
    if (!node.is_map()) {
      if (node.is_scalar() && !spec.scalar_key.empty()) {
        apply(*spec.field(spec.scalar_key), node, join(shown, spec.scalar_key));
        return;
      }
      detail::bad_value(node, shown.empty() ? "the configuration" : shown, "a section (a map of keys)");
    }
    if (spec.opaque) {
      w_.not_emulated.push_back(fmt::format("{} ({}): accepted, not emulated by gpemu", shown, node.origin));
      return;
    }
    // Fields in the table's order, so that e.g. computation_time_stdev applies
    // after computation_time wherever it stands in the file (as in DLIO).
    for (const FieldSpec& f : spec.fields) {
      if (const Node* v = node.find(f.name)) apply(f, *v, join(shown, f.name));
    }
    for (const SectionSpec& sub : spec.sections) {
      const Node* found = nullptr;
      std::string found_name;
      std::vector<std::string> spellings{sub.name};
      spellings.insert(spellings.end(), sub.aliases.begin(), sub.aliases.end());
      for (const std::string& name : spellings) {
        if (const Node* v = node.find(name)) {
          if (found != nullptr) {
            throw InputError(fmt::format("{}: '{}' and '{}' are the same section ({}); give one", v->origin,
                                         join(shown, found_name), join(shown, name), sub.path));
          }
          found = v;
          found_name = name;
        }
      }
      if (found != nullptr) section(sub, *found, join(shown, found_name));
    }
    for (const auto& [key, value] : node.entries) {
      if (spec.field(key) == nullptr && spec.section(key) == nullptr) unknown(spec, key, value, shown);
    }
  }

 private:
  void apply(const FieldSpec& field, const Node& value, const std::string& shown) {
    const FieldSpec* target = field.alias_of.empty() ? &field : detail::find_field(field.alias_of);
    if (target == nullptr) throw Error("gpemu bug: DLIO alias " + field.path + " has no target");
    if (!target->set) return;
    target->set(w_, value, shown);
    const std::string& canonical = target->path;
    const std::string text = target->get ? inline_text(target->get(w_)) : inline_text(value);
    auto it = assigned_.find(canonical);
    if (it != assigned_.end() && it->second.first != text) {
      throw InputError(fmt::format("{}: {} = {} conflicts with {} = {} ({}); both set {}; give it once", value.origin,
                                   shown, inline_text(value), it->second.second.first, it->second.first,
                                   it->second.second.second, canonical));
    }
    assigned_[canonical] = {text, {shown, value.origin}};
    w_.set_keys[canonical] = shown == canonical ? value.origin : value.origin + " (as " + shown + ")";
    if (!target->emulated || !field.emulated) {
      w_.not_emulated.push_back(fmt::format("{} ({}): accepted, not emulated by gpemu", shown, value.origin));
    }
  }

  void unknown(const SectionSpec& spec, const std::string& key, const Node& value, const std::string& shown) {
    const std::string full = join(shown, key);
    const std::vector<std::string> names = names_of(spec);
    std::string suggestion;
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const std::string& n : names) {
      const std::size_t d = detail::edit_distance(key, n);
      if (d < best) {
        best = d;
        suggestion = join(shown, n);
      }
    }
    // A close name in this section first; else the same name in another
    // section; else a looser match in this section.
    if (best > 2) {
      std::vector<std::string> elsewhere;
      find_everywhere(detail::schema(), key, elsewhere);
      if (!elsewhere.empty()) {
        suggestion = elsewhere.front();
      } else if (best > std::max<std::size_t>(2, key.size() / 3)) {
        suggestion.clear();
      }
    }
    const bool root = spec.path.empty();
    std::string msg = fmt::format("{}: unknown {} '{}'", value.origin, root ? "section" : "key", full);
    if (!suggestion.empty()) msg += fmt::format("; did you mean '{}'?", suggestion);
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    msg += fmt::format(" ({} accepts: {})", root ? "a DLIO configuration" : spec.path, list);
    if (strict_) throw InputError(msg + "; parse with strict = false to turn this into a warning");
    w_.warnings.push_back(msg);
  }

  DlioWorkload& w_;
  bool strict_;
  // canonical path -> (value text, (shown path, origin)) to catch aliases that disagree
  std::map<std::string, std::pair<std::string, std::pair<std::string, std::string>>> assigned_;
};

// The sections: the document itself, or what is under its `workload:` root.
Node extract_workload(Node doc, DlioWorkload& w, bool strict) {
  if (doc.is_null()) return Node::make_map(w.source);
  if (!doc.is_map()) {
    detail::bad_value(doc, "the configuration",
                      "a map of DLIO sections (model, framework, workflow, dataset, reader, train, ...), "
                      "at the top level or under 'workload:'");
  }
  Node* workload = doc.find("workload");
  if (workload == nullptr) return doc;
  Node wl = workload->is_null() ? Node::make_map(workload->origin) : *workload;
  if (!wl.is_map()) detail::bad_value(wl, "workload", "a map of DLIO sections");
  for (auto& [key, value] : doc.entries) {
    if (key == "workload") continue;
    if (key == "gpemu") {
      if (wl.find("gpemu") != nullptr) {
        throw InputError(
            fmt::format("{}: 'gpemu' is given both next to 'workload:' and inside it; give one", value.origin));
      }
      wl.entries.emplace_back(key, value);
    } else if (key == "hydra") {
      w.not_emulated.push_back(fmt::format("hydra ({}): hydra's own settings; not used by gpemu", value.origin));
    } else {
      const std::string msg =
          fmt::format("{}: unknown top-level key '{}' next to 'workload:' (accepted there: gpemu, hydra)", value.origin,
                      key);
      if (strict) throw InputError(msg + "; parse with strict = false to turn this into a warning");
      w.warnings.push_back(msg);
    }
  }
  return wl;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// `~workload.train` would reset every key of a section at once (hydra allows
// it): the workload silently loses its computation time, epochs and so on,
// which is rarely what was meant (QA finding S13). Only keys are reset.
void refuse_section_delete(const std::vector<std::string>& parts, const Node* target, const std::string& origin,
                           const std::string& key) {
  const detail::SectionSpec* spec = &detail::schema();
  for (const std::string& p : parts) {
    spec = spec->section(p);
    if (spec == nullptr) return;
  }
  if (spec->opaque) return;
  std::string keys;
  if (target != nullptr && target->is_map()) {
    for (const auto& [name, value] : target->entries) keys += (keys.empty() ? "" : ", ") + name;
  }
  const std::string example = target != nullptr && target->is_map() && !target->entries.empty()
                                  ? target->entries.front().first
                                  : (spec->fields.empty() ? std::string("<key>") : spec->fields.front().name);
  throw InputError(
      fmt::format("{}: {} is a whole section{}; removing a section would reset all of them to DLIO's defaults at once "
                  "(e.g. no computation time), so it is not supported; accepted: ~{}.<key> for each key to reset, "
                  "e.g. ~{}.{}",
                  origin, key, keys.empty() ? "" : fmt::format(" (it sets {})", keys), key, key, example));
}

// Applies one hydra-style override to the workload tree.
void apply_override(Node& tree, const std::string& raw, DlioWorkload& w) {
  const std::string text = trim(raw);
  const std::string origin = fmt::format("override '{}'", text);
  enum class Op { Set, Add, Force, Delete } op = Op::Set;
  std::string_view s = text;
  if (s.starts_with("~")) {
    op = Op::Delete;
    s.remove_prefix(1);
  } else if (s.starts_with("++")) {
    op = Op::Force;
    s.remove_prefix(2);
  } else if (s.starts_with("+")) {
    op = Op::Add;
    s.remove_prefix(1);
  }
  const auto eq = s.find('=');
  std::string key = trim(s.substr(0, eq));
  const std::string value = eq == std::string_view::npos ? "" : std::string(s.substr(eq + 1));
  const char* const syntax =
      "accepted: ++workload.<section>.<key>=<value> (also +..., plain workload.<section>.<key>=<value>, "
      "and ~workload.<section>.<key> to reset a key to its default)";
  if (op == Op::Delete && eq != std::string_view::npos) {
    throw InputError(
        fmt::format("{}: deleting only when the value matches (~key=value) is not supported; "
                    "write ~{}",
                    origin, key));
  }
  if (op != Op::Delete && eq == std::string_view::npos) {
    throw InputError(fmt::format("{}: no '=' in the override; {}", origin, syntax));
  }
  if (key.empty()) throw InputError(fmt::format("{}: no key before '='; {}", origin, syntax));
  if (key == "hydra" || key.starts_with("hydra.")) {
    w.not_emulated.push_back(fmt::format("{}: hydra's own setting; not used by gpemu", origin));
    return;
  }
  if (key == "workload") {
    throw InputError(
        fmt::format("{}: choosing a workload by name (hydra's config group) is not supported; "
                    "pass the workload's YAML file instead (gpemu ships configs/dlio/*.yaml)",
                    origin));
  }
  if (!key.starts_with("workload.")) {
    throw InputError(fmt::format("{}: override keys start with 'workload.', as in DLIO (e.g. '++workload.{}={}'); {}",
                                 origin, key, value, syntax));
  }
  std::vector<std::string> parts;
  {
    std::string_view rest = std::string_view(key).substr(std::string_view("workload.").size());
    while (true) {
      const auto dot = rest.find('.');
      parts.emplace_back(rest.substr(0, dot));
      if (parts.back().empty()) throw InputError(fmt::format("{}: empty name in key '{}'; {}", origin, key, syntax));
      if (dot == std::string_view::npos) break;
      rest = rest.substr(dot + 1);
    }
  }
  Node* cur = &tree;
  std::string walked = "workload";
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += "." + parts[i];
    Node* next = cur->find(parts[i]);
    if (next == nullptr) {
      if (op == Op::Delete) {
        throw InputError(fmt::format("{}: nothing to delete; {} is not set in the configuration", origin, key));
      }
      next = &cur->at_or_add(parts[i]);
      *next = Node::make_map(origin);
    } else if (next->is_null()) {
      *next = Node::make_map(origin);
    } else if (next->is_scalar() && i == 0 && parts[0] == "model") {
      // `model: resnet50` is shorthand for `model: {name: resnet50}`.
      Node m = Node::make_map(next->origin);
      m.entries.emplace_back("name", *next);
      *next = std::move(m);
    } else if (!next->is_map()) {
      throw InputError(fmt::format("{}: {} is a value ({}), not a section, so it has no key '{}'", origin, walked,
                                   detail::describe(*next), parts[i + 1]));
    }
    cur = next;
  }
  const std::string& last = parts.back();
  switch (op) {
    case Op::Delete:
      refuse_section_delete(parts, cur->find(last), origin, key);
      if (!cur->erase(last)) {
        throw InputError(fmt::format("{}: nothing to delete; {} is not set in the configuration", origin, key));
      }
      return;
    case Op::Add:
      if (const Node* existing = cur->find(last)) {
        throw InputError(
            fmt::format("{}: {} is already set ({}); '+' only adds a key that is not there "
                        "(hydra's rule); use '++{}={}' to override it",
                        origin, key, existing->origin, key, value));
      }
      break;
    case Op::Set:
    case Op::Force: break;
  }
  Node v = detail::parse_override_value(value, origin);
  Node& slot = cur->at_or_add(last);
  if (parts.size() == 1 && last == "model" && slot.is_map() && v.is_scalar()) {
    slot.at_or_add("name") = std::move(v);  // keep the rest of the model section
  } else {
    slot = std::move(v);
  }
}

// Notices that do not stop a run but change what it means.
void add_notices(DlioWorkload& w) {
  if (w.dataset.format == DataFormat::Tfrecord && w.reader.data_loader == DataLoaderKind::PyTorch) {
    w.warnings.push_back(
        "dataset.format = tfrecord with reader.data_loader = pytorch: DLIO's PyTorch loader does not read "
        "TFRecord files (DLIO stops with an error); use data_loader tensorflow or another format");
  }
  if (w.workflow.checkpoint && w.model.layer_parameters.empty()) {
    bool transformer = false;
    for (const auto& [key, where] : w.set_keys) transformer = transformer || key.starts_with("model.transformer.");
    if (transformer) {
      w.warnings.push_back(fmt::format(
          "model.transformer is given but gpemu does not derive checkpoint sizes from it; each writing rank "
          "writes model.model_size_bytes = {} bytes (give model_size_bytes, or layer_parameters and "
          "optimization_groups, for the size you mean)",
          w.model.model_size_bytes));
    }
  }
  if (effective_step_time_source(w) == StepTimeSource::CostModel && w.is_set("train.computation_time")) {
    w.warnings.push_back(fmt::format(
        "gpemu.gpu = {} makes the step time come from gpemu's cost model, so train.computation_time ({} s, {}) "
        "is not used; set gpemu.step_time: config to use it",
        w.gpemu.gpu, w.train.computation_time.expected(), w.set_keys.at("train.computation_time")));
  }
}

DlioWorkload parse_impl(std::string_view text, const std::vector<std::string>& overrides,
                        const DlioParseOptions& options, std::string source) {
  DlioWorkload w;
  w.source = source;
  try {
    Node tree = extract_workload(detail::parse_yaml(text, source), w, options.strict);
    for (const std::string& o : overrides) apply_override(tree, o, w);
    Converter(w, options.strict).section(detail::schema(), tree, "");
    validate(w);
  } catch (const InputError& e) {
    // Messages quote keys and values from the file, which may hold newlines
    // or control bytes (found by fuzz/dlio_yaml_fuzz.cpp).
    throw InputError(one_line_message(e.what()));
  }
  add_notices(w);
  return w;
}

}  // namespace

// Where a key's value came from, for validation messages.
std::string detail::key_origin(const DlioWorkload& w, const std::string& path) {
  auto it = w.set_keys.find(path);
  if (it != w.set_keys.end()) return it->second;
  return (w.source.empty() ? std::string("configuration") : w.source) + " (default)";
}

void detail::invalid(const DlioWorkload& w, const std::string& path, const std::string& value,
                     const std::string& accepted) {
  throw InputError(fmt::format("{}: {} = {} is not valid; accepted: {}", key_origin(w, path), path, value, accepted));
}

namespace {

Node section_node(const DlioWorkload& w, const SectionSpec& s) {
  Node n = Node::make_map();
  for (const FieldSpec& f : s.fields) {
    if (f.alias_of.empty() && f.get) n.entries.emplace_back(f.name, f.get(w));
  }
  for (const SectionSpec& sub : s.sections) {
    if (!sub.opaque) n.entries.emplace_back(sub.name, section_node(w, sub));
  }
  return n;
}

void collect_keys(const SectionSpec& s, const DlioWorkload& defaults, std::vector<DlioKeyInfo>& out) {
  for (const FieldSpec& f : s.fields) {
    DlioKeyInfo k;
    k.path = f.path;
    if (!f.alias_of.empty()) {
      const FieldSpec* target = detail::find_field(f.alias_of);
      k.alias_of = f.alias_of;
      k.accepted = target ? target->accepted : "";
      k.emulated = target ? target->emulated : true;
    } else {
      k.accepted = f.accepted;
      k.emulated = f.emulated;
      k.default_value = f.get ? inline_text(f.get(defaults)) : "null";
    }
    out.push_back(std::move(k));
  }
  for (const SectionSpec& sub : s.sections) {
    if (sub.opaque) {
      out.push_back(DlioKeyInfo{sub.path, "any map (kept for DLIO compatibility)", "", false, ""});
      continue;
    }
    collect_keys(sub, defaults, out);
  }
}

}  // namespace

// --- Public functions ------------------------------------------------------------

DlioWorkload parse_dlio_config(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                               const DlioParseOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(
        fmt::format("DLIO configuration '{}' is a directory; expected a YAML file such as "
                    "configs/dlio/unet3d_a100.yaml",
                    path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(
        fmt::format("DLIO configuration '{}' cannot be read ({}); expected a YAML file such as "
                    "configs/dlio/unet3d_a100.yaml",
                    path.string(), std::filesystem::exists(path, ec) ? "permission denied" : "no such file"));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_impl(buf.str(), overrides, options, path.string());
}

DlioWorkload parse_dlio_config_string(std::string_view yaml, const std::vector<std::string>& overrides,
                                      const DlioParseOptions& options, std::string_view source) {
  return parse_impl(yaml, overrides, options, std::string(source));
}

std::string to_yaml(const DlioWorkload& w) {
  const SectionSpec& root = detail::schema();
  Node doc = Node::make_map();
  for (const SectionSpec& s : root.sections) {
    if (s.opaque) continue;
    doc.entries.emplace_back(s.name, section_node(w, s));
    if (s.name == "model") {
      for (const FieldSpec& f : root.fields) doc.entries.emplace_back(f.name, f.get(w));
    }
  }
  return "# Effective DLIO configuration (gpemu), from " + (w.source.empty() ? std::string("code") : w.source) + "\n" +
         detail::emit_yaml(doc);
}

const std::vector<DlioKeyInfo>& dlio_keys() {
  static const std::vector<DlioKeyInfo> keys = [] {
    std::vector<DlioKeyInfo> out;
    const DlioWorkload defaults;
    collect_keys(detail::schema(), defaults, out);
    return out;
  }();
  return keys;
}

}  // namespace gpemu::dlio

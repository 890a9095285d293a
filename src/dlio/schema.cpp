#include "dlio/schema.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "common/checked.h"
#include "dlio/enums.h"
#include "gpemu/error.h"

namespace gpemu::dlio::detail {

// --- Helpers -----------------------------------------------------------------

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

void bad_value(const Node& value, const std::string& path, const std::string& accepted, const std::string& detail) {
  std::string shown = describe(value);
  if (value.is_scalar()) shown = "'" + shown + "'";
  throw InputError(fmt::format("{}: {} = {} is not valid{}; accepted: {}", value.origin, path, shown,
                               detail.empty() ? "" : " (" + detail + ")", accepted));
}

namespace {

std::string fmt_double(double d) { return fmt::format("{}", d); }

Node scalar(std::string text) { return Node::make_scalar(std::move(text)); }

Node null_node() { return Node{}; }

// Integer text: optional sign and digits only (DLIO's YAML integers).
// A quoted scalar ("2", '2', !!str 2) is text: no number or boolean (S13).
std::optional<std::int64_t> to_int(const Node& n) {
  if (!n.is_scalar() || n.scalar.empty() || n.quoted) return std::nullopt;
  const std::string& s = n.scalar;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (std::size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::optional<double> to_double(const Node& n) {
  if (!n.is_scalar() || n.scalar.empty() || n.quoted) return std::nullopt;
  const std::string& s = n.scalar;
  for (char c : s) {
    // Reject hex floats, "inf", "nan" and YAML's ".inf": numbers only.
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) {
      return std::nullopt;
    }
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> to_bool(const Node& n) {
  if (!n.is_scalar() || n.quoted) return std::nullopt;
  std::string s = n.scalar;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "true") return true;
  if (s == "false") return false;
  return std::nullopt;
}

// --- Rules -------------------------------------------------------------------

struct IntRule {
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  bool minus_one = false;  // -1 also accepted (DLIO's "unset")
  std::string text() const {
    std::string range;
    if (max != std::numeric_limits<std::int64_t>::max()) {
      range = fmt::format("an integer from {} to {}", min, max);
    } else if (min != std::numeric_limits<std::int64_t>::min()) {
      range = fmt::format("an integer >= {}", min);
    } else {
      range = "an integer";
    }
    return minus_one ? "-1 or " + range : range;
  }
  bool ok(std::int64_t v) const { return (minus_one && v == -1) || (v >= min && v <= max); }
};

struct FloatRule {
  double min = -std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  double max = std::numeric_limits<double>::infinity();
  bool minus_one = false;
  std::string what = "a number";
  std::string text() const {
    std::string out = what;
    if (std::isfinite(min)) out += fmt::format(" {} {}", min_exclusive ? ">" : ">=", fmt_double(min));
    if (std::isfinite(max)) out += fmt::format("{} <= {}", std::isfinite(min) ? " and" : "", fmt_double(max));
    return minus_one ? "-1 or " + out : out;
  }
  bool ok(double v) const {
    if (minus_one && v == -1) return true;
    if (min_exclusive ? !(v > min) : !(v >= min)) return false;
    return v <= max;
  }
};

IntRule at_least(std::int64_t min) { return IntRule{min}; }
IntRule minus_one_or_at_least(std::int64_t min) { return IntRule{min, std::numeric_limits<std::int64_t>::max(), true}; }

// Accessors are generic lambdas `[](auto& w) -> auto& { return w.<field>; }`.
#define GPEMU_FIELD(expr) \
  [](auto& w) -> auto& { return w.expr; }

// --- Field builders ------------------------------------------------------------

template <class Acc>
FieldSpec int_field(std::string name, Acc acc, IntRule rule, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = rule.text();
  f.emulated = emulated;
  f.set = [acc, rule, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    auto& ref = acc(w);
    using T = std::remove_reference_t<decltype(ref)>;
    const auto v = to_int(n);
    if (!v) bad_value(n, path, accepted);
    if (*v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        *v > static_cast<std::int64_t>(std::numeric_limits<T>::max()) || !rule.ok(*v)) {
      bad_value(n, path, accepted);
    }
    ref = static_cast<T>(*v);
  };
  f.get = [acc](const DlioWorkload& w) { return scalar(std::to_string(acc(w))); };
  f.valid = [acc, rule](const DlioWorkload& w) { return rule.ok(static_cast<std::int64_t>(acc(w))); };
  return f;
}

template <class Acc>
FieldSpec float_field(std::string name, Acc acc, FloatRule rule, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = rule.text();
  f.emulated = emulated;
  f.set = [acc, rule, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    const auto v = to_double(n);
    if (!v || !rule.ok(*v)) bad_value(n, path, accepted);
    acc(w) = *v;
  };
  f.get = [acc](const DlioWorkload& w) { return scalar(fmt_double(acc(w))); };
  f.valid = [acc, rule](const DlioWorkload& w) { return rule.ok(acc(w)); };
  return f;
}

template <class Acc>
FieldSpec bool_field(std::string name, Acc acc, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = "true or false (any case)";
  f.emulated = emulated;
  f.set = [acc, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    const auto v = to_bool(n);
    if (!v) bad_value(n, path, accepted);
    acc(w) = *v;
  };
  f.get = [acc](const DlioWorkload& w) { return scalar(acc(w) ? "true" : "false"); };
  return f;
}

template <class Acc>
FieldSpec string_field(std::string name, Acc acc, bool emulated = true, bool non_empty = false,
                       std::string accepted = {}) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = !accepted.empty() ? std::move(accepted) : non_empty ? "a non-empty text" : "a text";
  f.emulated = emulated;
  f.set = [acc, non_empty, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    if (n.is_null()) {
      if (non_empty) bad_value(n, path, accepted);
      acc(w).clear();
      return;
    }
    if (!n.is_scalar() || (non_empty && n.scalar.empty())) bad_value(n, path, accepted);
    acc(w) = n.scalar;
  };
  f.get = [acc](const DlioWorkload& w) {
    Node n = scalar(acc(w));
    return n;
  };
  if (non_empty) {
    f.valid = [acc](const DlioWorkload& w) { return !acc(w).empty(); };
  }
  return f;
}

template <class E, class Acc>
FieldSpec enum_field(std::string name, Acc acc, bool emulated = true, std::string note = {}) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = enum_choices<E>() + (note.empty() ? "" : " (" + note + ")");
  f.emulated = emulated;
  f.set = [acc, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    std::optional<E> v;
    if (n.is_scalar()) v = parse_enum<E>(n.scalar);
    if (!v) bad_value(n, path, accepted);
    acc(w) = *v;
  };
  f.get = [acc](const DlioWorkload& w) { return scalar(std::string(enum_name(acc(w)))); };
  return f;
}

template <class Acc>
FieldSpec int_list_field(std::string name, Acc acc, std::int64_t min_each, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = fmt::format("a list of integers >= {}, e.g. [1024, 528]", min_each);
  f.emulated = emulated;
  f.set = [acc, min_each, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    std::vector<std::int64_t> out;
    if (n.is_null()) {
      acc(w).clear();
      return;
    }
    if (!n.is_list()) bad_value(n, path, accepted);
    for (const Node& item : n.items) {
      const auto v = to_int(item);
      if (!v || *v < min_each) bad_value(item, path, accepted);
      out.push_back(*v);
    }
    acc(w) = std::move(out);
  };
  f.get = [acc](const DlioWorkload& w) {
    Node n;
    n.kind = Node::Kind::List;
    for (std::int64_t v : acc(w)) n.items.push_back(scalar(std::to_string(v)));
    return n;
  };
  f.valid = [acc, min_each](const DlioWorkload& w) {
    return std::all_of(acc(w).begin(), acc(w).end(), [&](std::int64_t v) { return v >= min_each; });
  };
  return f;
}

template <class Acc>
FieldSpec string_list_field(std::string name, Acc acc, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = "a text or a list of texts";
  f.emulated = emulated;
  f.set = [acc, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    std::vector<std::string> out;
    if (n.is_scalar()) {
      out.push_back(n.scalar);
    } else if (n.is_list()) {
      for (const Node& item : n.items) {
        if (!item.is_scalar()) bad_value(item, path, accepted);
        out.push_back(item.scalar);
      }
    } else if (!n.is_null()) {
      bad_value(n, path, accepted);
    }
    acc(w) = std::move(out);
  };
  f.get = [acc](const DlioWorkload& w) {
    Node n;
    n.kind = Node::Kind::List;
    for (const std::string& v : acc(w)) n.items.push_back(scalar(v));
    return n;
  };
  return f;
}

const char* const kTimeAccepted =
    "seconds from 0 to 1e6, or a distribution: {mean, stdev} (normal), {type: uniform, min, max}, "
    "{type: gamma, shape, scale} (both > 0), {type: exponential, scale} or {type: poisson, lam}, every figure "
    "from 0 to 1e6";

bool time_ok(const TimeSpec& t) {
  for (double v : {t.mean, t.stdev, t.min, t.max, t.shape, t.scale, t.lam}) {
    // kMaxInputSeconds: a step of days already; more would overflow the
    // emulated clock once summed over a run.
    if (!(v >= 0) || !std::isfinite(v) || v > kMaxInputSeconds) return false;
  }
  if (t.distribution == Distribution::Gamma && !(t.shape > 0 && t.scale > 0)) return false;
  return t.distribution != Distribution::Uniform || t.min <= t.max;
}

TimeSpec parse_time(const Node& n, const std::string& path) {
  TimeSpec t;
  if (n.is_scalar()) {
    const auto v = to_double(n);
    if (!v) bad_value(n, path, kTimeAccepted);
    t.mean = *v;
  } else if (n.is_map()) {
    for (const auto& [key, value] : n.entries) {
      const std::string sub = path + "." + key;
      if (key == "type") {
        std::optional<Distribution> d;
        if (value.is_scalar()) d = parse_enum<Distribution>(value.scalar);
        if (!d) bad_value(value, sub, enum_choices<Distribution>());
        t.distribution = *d;
        continue;
      }
      double* slot = nullptr;
      if (key == "mean")
        slot = &t.mean;
      else if (key == "stdev")
        slot = &t.stdev;
      else if (key == "min")
        slot = &t.min;
      else if (key == "max")
        slot = &t.max;
      else if (key == "shape")
        slot = &t.shape;
      else if (key == "scale")
        slot = &t.scale;
      else if (key == "lam")
        slot = &t.lam;
      if (slot == nullptr) {
        throw InputError(
            fmt::format("{}: unknown key '{}' in the time distribution {}; accepted keys: "
                        "type, mean, stdev, min, max, shape, scale, lam",
                        value.origin, key, path));
      }
      const auto v = to_double(value);
      if (!v) bad_value(value, sub, "a number >= 0");
      *slot = *v;
    }
  } else {
    bad_value(n, path, kTimeAccepted);
  }
  if (!time_ok(t)) bad_value(n, path, kTimeAccepted);
  return t;
}

Node time_node(const TimeSpec& t) {
  if (t.distribution == Distribution::Normal) return scalar(fmt_double(t.mean));
  Node n = Node::make_map();
  n.entries.emplace_back("type", scalar(std::string(enum_name(t.distribution))));
  switch (t.distribution) {
    case Distribution::Normal: break;
    case Distribution::Uniform:
      n.entries.emplace_back("min", scalar(fmt_double(t.min)));
      n.entries.emplace_back("max", scalar(fmt_double(t.max)));
      break;
    case Distribution::Gamma:
      n.entries.emplace_back("shape", scalar(fmt_double(t.shape)));
      n.entries.emplace_back("scale", scalar(fmt_double(t.scale)));
      break;
    case Distribution::Exponential: n.entries.emplace_back("scale", scalar(fmt_double(t.scale))); break;
    case Distribution::Poisson: n.entries.emplace_back("lam", scalar(fmt_double(t.lam))); break;
  }
  return n;
}

template <class Acc>
FieldSpec time_field(std::string name, Acc acc, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = kTimeAccepted;
  f.emulated = emulated;
  f.set = [acc](DlioWorkload& w, const Node& n, const std::string& path) { acc(w) = parse_time(n, path); };
  f.get = [acc](const DlioWorkload& w) { return time_node(acc(w)); };
  f.valid = [acc](const DlioWorkload& w) { return time_ok(acc(w)); };
  return f;
}

// `<time>_stdev`: the standard deviation of a normal time distribution.
template <class Acc>
FieldSpec stdev_field(std::string name, Acc time_acc, bool emulated = true) {
  FieldSpec f;
  f.name = std::move(name);
  f.accepted = "seconds >= 0";
  f.emulated = emulated;
  f.set = [time_acc, accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
    const auto v = to_double(n);
    if (!v || *v < 0) bad_value(n, path, accepted);
    time_acc(w).stdev = *v;
  };
  f.get = [time_acc](const DlioWorkload& w) { return scalar(fmt_double(time_acc(w).stdev)); };
  return f;
}

FieldSpec alias(std::string name, std::string canonical_path) {
  FieldSpec f;
  f.name = std::move(name);
  f.alias_of = std::move(canonical_path);
  return f;
}

SectionSpec opaque_section(std::string name) {
  SectionSpec s;
  s.name = std::move(name);
  s.opaque = true;
  return s;
}

// --- The table -----------------------------------------------------------------

SectionSpec build_schema() {
  SectionSpec root;

  root.fields.push_back(enum_field<Framework>("framework", GPEMU_FIELD(framework)));

  // model
  {
    SectionSpec s;
    s.name = "model";
    s.scalar_key = "name";
    s.fields.push_back(string_field("name", GPEMU_FIELD(model.name)));
    s.fields.push_back(string_field("type", GPEMU_FIELD(model.type)));
    s.fields.push_back(
        float_field("model_size_bytes", GPEMU_FIELD(model.model_size_bytes),
                    FloatRule{0, false, std::numeric_limits<double>::infinity(), false, "a number of bytes"}));
    s.fields.push_back(alias("model_size", "model.model_size_bytes"));
    s.fields.push_back(enum_field<DataType>("model_datatype", GPEMU_FIELD(model.model_datatype)));
    s.fields.push_back(enum_field<DataType>("optimizer_datatype", GPEMU_FIELD(model.optimizer_datatype)));
    s.fields.push_back(int_list_field("optimization_groups", GPEMU_FIELD(model.optimization_groups), 0));
    s.fields.push_back(int_field("num_layers", GPEMU_FIELD(model.num_layers), minus_one_or_at_least(1)));
    s.fields.push_back(int_list_field("layer_parameters", GPEMU_FIELD(model.layer_parameters), 0));
    SectionSpec par;
    par.name = "parallelism";
    par.fields.push_back(int_field("tensor", GPEMU_FIELD(model.parallelism.tensor), at_least(1)));
    par.fields.push_back(int_field("pipeline", GPEMU_FIELD(model.parallelism.pipeline), at_least(1)));
    par.fields.push_back(int_field("data", GPEMU_FIELD(model.parallelism.data), minus_one_or_at_least(1)));
    par.fields.push_back(int_field("zero_stage", GPEMU_FIELD(model.parallelism.zero_stage), IntRule{0, 3}, false));
    s.sections.push_back(std::move(par));
    SectionSpec tr;
    tr.name = "transformer";
    tr.fields.push_back(int_field("hidden_size", GPEMU_FIELD(model.transformer.hidden_size), at_least(1), false));
    tr.fields.push_back(
        int_field("ffn_hidden_size", GPEMU_FIELD(model.transformer.ffn_hidden_size), at_least(1), false));
    tr.fields.push_back(int_field("vocab_size", GPEMU_FIELD(model.transformer.vocab_size), at_least(1), false));
    tr.fields.push_back(
        int_field("num_attention_heads", GPEMU_FIELD(model.transformer.num_attention_heads), at_least(1), false));
    tr.fields.push_back(int_field("num_kv_heads", GPEMU_FIELD(model.transformer.num_kv_heads), at_least(1), false));
    s.sections.push_back(std::move(tr));
    root.sections.push_back(std::move(s));
  }

  // workflow
  {
    SectionSpec s;
    s.name = "workflow";
    s.fields.push_back(bool_field("generate_data", GPEMU_FIELD(workflow.generate_data)));
    s.fields.push_back(bool_field("train", GPEMU_FIELD(workflow.train)));
    s.fields.push_back(bool_field("evaluation", GPEMU_FIELD(workflow.evaluation)));
    s.fields.push_back(bool_field("checkpoint", GPEMU_FIELD(workflow.checkpoint)));
    s.fields.push_back(bool_field("profiling", GPEMU_FIELD(workflow.profiling), false));
    s.fields.push_back(bool_field("debug", GPEMU_FIELD(workflow.debug), false));
    root.sections.push_back(std::move(s));
  }

  // dataset
  {
    SectionSpec s;
    s.name = "dataset";
    const FloatRule positive_bytes{0, true, std::numeric_limits<double>::infinity(), false, "a number of bytes"};
    const FloatRule bytes{0, false, std::numeric_limits<double>::infinity(), false, "a number of bytes"};
    s.fields.push_back(string_field("data_folder", GPEMU_FIELD(dataset.data_folder), true, true));
    s.fields.push_back(enum_field<DataFormat>("format", GPEMU_FIELD(dataset.format)));
    s.fields.push_back(int_field("num_files_train", GPEMU_FIELD(dataset.num_files_train), at_least(0)));
    s.fields.push_back(int_field("num_files_eval", GPEMU_FIELD(dataset.num_files_eval), at_least(0)));
    s.fields.push_back(int_field("num_samples_per_file", GPEMU_FIELD(dataset.num_samples_per_file), at_least(1)));
    s.fields.push_back(float_field("record_length_bytes", GPEMU_FIELD(dataset.record_length_bytes), positive_bytes));
    s.fields.push_back(alias("record_length", "dataset.record_length_bytes"));
    s.fields.push_back(float_field("record_length_bytes_stdev", GPEMU_FIELD(dataset.record_length_bytes_stdev), bytes));
    s.fields.push_back(alias("record_length_stdev", "dataset.record_length_bytes_stdev"));
    s.fields.push_back(
        float_field("record_length_bytes_resize", GPEMU_FIELD(dataset.record_length_bytes_resize), bytes));
    s.fields.push_back(alias("record_length_resize", "dataset.record_length_bytes_resize"));
    s.fields.push_back(int_field("num_subfolders_train", GPEMU_FIELD(dataset.num_subfolders_train), at_least(0)));
    s.fields.push_back(int_field("num_subfolders_eval", GPEMU_FIELD(dataset.num_subfolders_eval), at_least(0)));
    s.fields.push_back(string_field("file_prefix", GPEMU_FIELD(dataset.file_prefix)));
    s.fields.push_back(enum_field<Compression>("compression", GPEMU_FIELD(dataset.compression), false));
    s.fields.push_back(int_field("compression_level", GPEMU_FIELD(dataset.compression_level), IntRule{0, 9}, false));
    s.fields.push_back(bool_field("enable_chunking", GPEMU_FIELD(dataset.enable_chunking), false));
    s.fields.push_back(int_field("chunk_size", GPEMU_FIELD(dataset.chunk_size), at_least(0), false));
    s.fields.push_back(bool_field("keep_files", GPEMU_FIELD(dataset.keep_files), false));
    s.fields.push_back(
        int_field("generation_buffer_size", GPEMU_FIELD(dataset.generation_buffer_size), at_least(1), false));
    s.fields.push_back(int_list_field("record_dims", GPEMU_FIELD(dataset.record_dims), 1, false));
    s.fields.push_back(string_field("record_element_type", GPEMU_FIELD(dataset.record_element_type), false));
    s.sections.push_back(opaque_section("hdf5"));
    s.sections.push_back(opaque_section("parquet"));
    root.sections.push_back(std::move(s));
  }

  // reader (DLIO also accepts the section name data_reader)
  {
    SectionSpec s;
    s.name = "reader";
    s.aliases = {"data_reader"};
    s.fields.push_back(enum_field<DataLoaderKind>("data_loader", GPEMU_FIELD(reader.data_loader)));
    s.fields.push_back(int_field("batch_size", GPEMU_FIELD(reader.batch_size), at_least(1)));
    s.fields.push_back(int_field("batch_size_eval", GPEMU_FIELD(reader.batch_size_eval), at_least(1)));
    s.fields.push_back(int_field("read_threads", GPEMU_FIELD(reader.read_threads), at_least(0)));
    s.fields.push_back(int_field("computation_threads", GPEMU_FIELD(reader.computation_threads), at_least(1)));
    s.fields.push_back(int_field("prefetch_size", GPEMU_FIELD(reader.prefetch_size), at_least(0)));
    {
      FieldSpec f;
      f.name = "transfer_size";
      f.accepted = "an integer >= 1 (bytes), or null";
      f.set = [accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
        if (n.is_null()) {
          w.reader.transfer_size.reset();
          return;
        }
        const auto v = to_int(n);
        if (!v || *v < 1) bad_value(n, path, accepted);
        w.reader.transfer_size = *v;
      };
      f.get = [](const DlioWorkload& w) {
        return w.reader.transfer_size ? scalar(std::to_string(*w.reader.transfer_size)) : null_node();
      };
      f.valid = [](const DlioWorkload& w) { return !w.reader.transfer_size || *w.reader.transfer_size >= 1; };
      s.fields.push_back(std::move(f));
    }
    s.fields.push_back(enum_field<Shuffle>("file_shuffle", GPEMU_FIELD(reader.file_shuffle)));
    s.fields.push_back(enum_field<Shuffle>("sample_shuffle", GPEMU_FIELD(reader.sample_shuffle)));
    s.fields.push_back(int_field("shuffle_size", GPEMU_FIELD(reader.shuffle_size), at_least(1)));
    s.fields.push_back(enum_field<ReadType>("read_type", GPEMU_FIELD(reader.read_type)));
    s.fields.push_back(enum_field<FileAccess>("file_access", GPEMU_FIELD(reader.file_access), false));
    s.fields.push_back(time_field("preprocess_time", GPEMU_FIELD(reader.preprocess_time)));
    s.fields.push_back(stdev_field("preprocess_time_stdev", GPEMU_FIELD(reader.preprocess_time)));
    s.fields.push_back(bool_field("pin_memory", GPEMU_FIELD(reader.pin_memory)));
    s.fields.push_back(bool_field("odirect", GPEMU_FIELD(reader.odirect)));
    s.fields.push_back(bool_field("dont_use_mmap", GPEMU_FIELD(reader.dont_use_mmap), false));
    s.fields.push_back(string_field("multiprocessing_context", GPEMU_FIELD(reader.multiprocessing_context), false));
    s.fields.push_back(
        int_list_field("transformed_record_dims", GPEMU_FIELD(reader.transformed_record_dims), 1, false));
    s.fields.push_back(
        string_field("transformed_record_element_type", GPEMU_FIELD(reader.transformed_record_element_type), false));
    // DLIO's plug-in hooks: Python class names gpemu cannot load.
    for (const char* name : {"data_loader_classname", "data_loader_sampler", "reader_classname"}) {
      FieldSpec f;
      f.name = name;
      f.accepted = "a text (a DLIO Python plug-in; not emulated)";
      f.emulated = false;
      f.set = [](DlioWorkload&, const Node& n, const std::string& path) {
        if (!n.is_scalar() && !n.is_null()) bad_value(n, path, "a text");
      };
      s.fields.push_back(std::move(f));
    }
    root.sections.push_back(std::move(s));
  }

  // train
  {
    SectionSpec s;
    s.name = "train";
    s.fields.push_back(int_field("epochs", GPEMU_FIELD(train.epochs), at_least(1)));
    s.fields.push_back(time_field("computation_time", GPEMU_FIELD(train.computation_time)));
    s.fields.push_back(stdev_field("computation_time_stdev", GPEMU_FIELD(train.computation_time)));
    s.fields.push_back(
        int_field("total_training_steps", GPEMU_FIELD(train.total_training_steps), minus_one_or_at_least(1)));
    s.fields.push_back(bool_field("seed_change_epoch", GPEMU_FIELD(train.seed_change_epoch)));
    s.fields.push_back(int_field("seed", GPEMU_FIELD(train.seed), IntRule{}));
    root.sections.push_back(std::move(s));
  }

  // evaluation
  {
    SectionSpec s;
    s.name = "evaluation";
    s.fields.push_back(time_field("eval_time", GPEMU_FIELD(evaluation.eval_time)));
    s.fields.push_back(stdev_field("eval_time_stdev", GPEMU_FIELD(evaluation.eval_time)));
    s.fields.push_back(int_field("eval_after_epoch", GPEMU_FIELD(evaluation.eval_after_epoch), at_least(0)));
    s.fields.push_back(int_field("epochs_between_evals", GPEMU_FIELD(evaluation.epochs_between_evals), at_least(1)));
    root.sections.push_back(std::move(s));
  }

  // checkpoint
  {
    SectionSpec s;
    s.name = "checkpoint";
    s.fields.push_back(string_field("checkpoint_folder", GPEMU_FIELD(checkpoint.checkpoint_folder), true, true));
    s.fields.push_back(
        int_field("checkpoint_after_epoch", GPEMU_FIELD(checkpoint.checkpoint_after_epoch), at_least(1)));
    s.fields.push_back(
        int_field("epochs_between_checkpoints", GPEMU_FIELD(checkpoint.epochs_between_checkpoints), at_least(1)));
    s.fields.push_back(int_field("steps_between_checkpoints", GPEMU_FIELD(checkpoint.steps_between_checkpoints),
                                 minus_one_or_at_least(1)));
    s.fields.push_back(alias("model_size", "model.model_size_bytes"));
    s.fields.push_back(enum_field<CheckpointType>("type", GPEMU_FIELD(checkpoint.type)));
    s.fields.push_back(enum_field<CheckpointMode>("mode", GPEMU_FIELD(checkpoint.mode), false));
    s.fields.push_back(bool_field("fsync", GPEMU_FIELD(checkpoint.fsync)));
    s.fields.push_back(float_field("time_between_checkpoints", GPEMU_FIELD(checkpoint.time_between_checkpoints),
                                   FloatRule{0, true, std::numeric_limits<double>::infinity(), true, "seconds"},
                                   false));
    s.fields.push_back(
        int_field("num_checkpoints_write", GPEMU_FIELD(checkpoint.num_checkpoints_write), minus_one_or_at_least(1)));
    s.fields.push_back(int_field("num_checkpoints_read", GPEMU_FIELD(checkpoint.num_checkpoints_read),
                                 minus_one_or_at_least(0), false));
    s.fields.push_back(bool_field("recovery_rank_shift", GPEMU_FIELD(checkpoint.recovery_rank_shift), false));
    s.fields.push_back(bool_field("rank_sync", GPEMU_FIELD(checkpoint.rank_sync), false));
    s.fields.push_back(bool_field("randomize_tensor", GPEMU_FIELD(checkpoint.randomize_tensor)));
    {
      FieldSpec f;
      f.name = "checkpoint_mechanism_classname";
      f.accepted = "a text (a DLIO Python plug-in; not emulated)";
      f.emulated = false;
      f.set = [](DlioWorkload&, const Node& n, const std::string& path) {
        if (!n.is_scalar() && !n.is_null()) bad_value(n, path, "a text");
      };
      s.fields.push_back(std::move(f));
    }
    s.sections.push_back(opaque_section("ksm"));
    root.sections.push_back(std::move(s));
  }

  // metric
  {
    SectionSpec s;
    s.name = "metric";
    s.fields.push_back(float_field("au", GPEMU_FIELD(metric.au), FloatRule{0, true, 1.0, false, "a fraction"}));
    root.sections.push_back(std::move(s));
  }

  // output
  {
    SectionSpec s;
    s.name = "output";
    s.fields.push_back(string_field("folder", GPEMU_FIELD(output.folder), false));
    s.fields.push_back(string_field("log_file", GPEMU_FIELD(output.log_file), false));
    SectionSpec m;
    m.name = "metric";
    m.fields.push_back(int_field("exclude_start_steps", GPEMU_FIELD(output.exclude_start_steps), at_least(0)));
    m.fields.push_back(int_field("exclude_end_steps", GPEMU_FIELD(output.exclude_end_steps), at_least(0)));
    s.sections.push_back(std::move(m));
    root.sections.push_back(std::move(s));
  }

  // profiling
  {
    SectionSpec s;
    s.name = "profiling";
    s.fields.push_back(enum_field<Profiler>("profiler", GPEMU_FIELD(profiling.profiler), false));
    s.fields.push_back(string_list_field("iostat_devices", GPEMU_FIELD(profiling.iostat_devices), false));
    root.sections.push_back(std::move(s));
  }

  // storage
  {
    SectionSpec s;
    s.name = "storage";
    s.fields.push_back(enum_field<StorageType>("storage_type", GPEMU_FIELD(storage.storage_type), true,
                                               "gpemu reads and writes POSIX file systems only; DLIO's s3, "
                                               "daos_pytorch and other object stores are not supported"));
    s.fields.push_back(string_field("storage_root", GPEMU_FIELD(storage.storage_root)));
    s.sections.push_back(opaque_section("storage_options"));
    root.sections.push_back(std::move(s));
  }

  // gpemu (gpemu's extension)
  {
    SectionSpec s;
    s.name = "gpemu";
    {
      FieldSpec f;
      f.name = "gpu";
      f.accepted = "a GPU of gpemu's catalog (gpemu devices lists them), e.g. A100-SXM4-80GB, H100-SXM5-80GB";
      f.set = [accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
        if (n.is_scalar() && n.scalar.empty() && n.quoted)  // '' ran on no GPU without a word (S13)
          throw InputError(
              fmt::format("{}: {} = '': an empty name; accepted: {}, or null (~) for none", n.origin, path, accepted));
        if (n.is_null() || (n.is_scalar() && n.scalar.empty())) {
          w.gpemu.gpu.clear();
          return;
        }
        if (!n.is_scalar()) bad_value(n, path, accepted);
        try {
          w.gpemu.gpu = find_gpu(n.scalar).id;
        } catch (const InputError& e) {
          throw InputError(fmt::format("{}: {} = '{}': {}", n.origin, path, n.scalar, e.what()));
        }
      };
      f.get = [](const DlioWorkload& w) { return scalar(w.gpemu.gpu); };
      f.valid = [](const DlioWorkload& w) { return w.gpemu.gpu.empty() || try_find_gpu(w.gpemu.gpu) != nullptr; };
      s.fields.push_back(std::move(f));
    }
    s.fields.push_back(string_field("model", GPEMU_FIELD(gpemu.model)));
    {
      FieldSpec f;
      f.name = "precision";
      f.accepted = "fp32, tf32, fp16, bf16 or fp8, or null for the cost model's default";
      f.set = [accepted = f.accepted](DlioWorkload& w, const Node& n, const std::string& path) {
        if (n.is_null()) {
          w.gpemu.precision.reset();
          return;
        }
        if (!n.is_scalar()) bad_value(n, path, accepted);
        try {
          w.gpemu.precision = parse_precision(n.scalar);
        } catch (const InputError&) {
          bad_value(n, path, accepted);
        }
      };
      f.get = [](const DlioWorkload& w) {
        return w.gpemu.precision ? scalar(std::string(to_string(*w.gpemu.precision))) : null_node();
      };
      s.fields.push_back(std::move(f));
    }
    s.fields.push_back(int_field("world_size", GPEMU_FIELD(gpemu.world_size), at_least(1)));
    s.fields.push_back(enum_field<StepTimeSource>("step_time", GPEMU_FIELD(gpemu.step_time)));
    // The nodes' layout against the world size is validate()'s (check_nodes);
    // the network is read when a run starts.
    s.fields.push_back(int_field("nodes", GPEMU_FIELD(gpemu.nodes), at_least(1)));
    s.fields.push_back(string_field("network", GPEMU_FIELD(gpemu.network), true, true,
                                    "10gbe, 25gbe, 100gbe, 400gbe or a network JSON file (docs/interconnect.md)"));
    root.sections.push_back(std::move(s));
  }

  return root;
}

void assign_paths(SectionSpec& s, const std::string& prefix) {
  s.path = prefix;
  const std::string p = prefix.empty() ? "" : prefix + ".";
  for (FieldSpec& f : s.fields) f.path = p + f.name;
  for (SectionSpec& sub : s.sections) assign_paths(sub, p + sub.name);
}

}  // namespace

const FieldSpec* SectionSpec::field(std::string_view key) const {
  for (const FieldSpec& f : fields) {
    if (f.name == key) return &f;
  }
  return nullptr;
}

const SectionSpec* SectionSpec::section(std::string_view key) const {
  for (const SectionSpec& s : sections) {
    if (s.name == key) return &s;
    for (const std::string& a : s.aliases) {
      if (a == key) return &s;
    }
  }
  return nullptr;
}

const SectionSpec& schema() {
  static const SectionSpec root = [] {
    SectionSpec r = build_schema();
    assign_paths(r, "");
    return r;
  }();
  return root;
}

const FieldSpec* find_field(std::string_view path) {
  const SectionSpec* s = &schema();
  std::string_view rest = path;
  while (true) {
    const auto dot = rest.find('.');
    if (dot == std::string_view::npos) {
      const FieldSpec* f = s->field(rest);
      return (f != nullptr && f->alias_of.empty()) ? f : nullptr;
    }
    s = s->section(rest.substr(0, dot));
    if (s == nullptr) return nullptr;
    rest = rest.substr(dot + 1);
  }
}

}  // namespace gpemu::dlio::detail

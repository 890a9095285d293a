#include "dlio/tree.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include <fmt/format.h>

#include "common/message_text.h"
#include "gpemu/error.h"

namespace gpemu::dlio::detail {

Node::Node() = default;
Node::~Node() = default;
Node::Node(const Node&) = default;
Node::Node(Node&&) noexcept = default;
Node& Node::operator=(const Node&) = default;
Node& Node::operator=(Node&&) noexcept = default;

const Node* Node::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

Node* Node::find(std::string_view key) {
  for (auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Node::erase(std::string_view key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

Node& Node::at_or_add(std::string_view key) {
  if (Node* n = find(key)) return *n;
  entries.emplace_back(std::string(key), Node{});
  return entries.back().second;
}

Node Node::make_scalar(std::string text, std::string origin) {
  Node n;
  n.kind = Kind::Scalar;
  n.scalar = std::move(text);
  n.origin = std::move(origin);
  return n;
}

Node Node::make_map(std::string origin) {
  Node n;
  n.kind = Kind::Map;
  n.origin = std::move(origin);
  return n;
}

namespace {

std::string where(const std::string& source, const YAML::Mark& mark) {
  if (mark.line < 0) return source;
  return fmt::format("{}:{}", source, mark.line + 1);
}

// Limits on the tree a YAML text may expand to. yaml-cpp shares the node of
// an alias (*a) with its anchor (&a), so a 1 KB text of nested aliases is a
// graph of a billion leaves once walked; DLIO workloads have a few hundred
// nodes and nest 4 deep.
constexpr std::size_t kMaxYamlNodes = 100000;
constexpr int kMaxYamlDepth = 64;

struct Converter {
  const std::string& source;
  std::size_t nodes = 0;

  Node convert(const YAML::Node& y, const std::string& origin, int depth) {
    if (++nodes > kMaxYamlNodes)
      throw InputError(
          fmt::format("{}: the document expands to more than {} values (through anchors and aliases "
                      "such as &a / *a, or sheer size); expected a DLIO workload of at most that many",
                      where(source, y.Mark()), kMaxYamlNodes));
    if (depth > kMaxYamlDepth)
      throw InputError(
          fmt::format("{}: values nested more than {} levels deep; expected a DLIO workload, which "
                      "nests 4 deep",
                      where(source, y.Mark()), kMaxYamlDepth));
    Node n;
    n.origin = origin;
    switch (y.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null: n.kind = Node::Kind::Null; break;
      case YAML::NodeType::Scalar:
        n.kind = Node::Kind::Scalar;
        n.scalar = y.Scalar();
        // Quoted, or tagged a string (!!str 2): text, never a number (S13).
        n.quoted = y.Tag() == "!" || y.Tag() == "tag:yaml.org,2002:str";
        break;
      case YAML::NodeType::Sequence:
        n.kind = Node::Kind::List;
        for (const YAML::Node& item : y) {
          n.items.push_back(convert(item, origin.empty() ? origin : where(source, item.Mark()), depth + 1));
        }
        break;
      case YAML::NodeType::Map: {
        n.kind = Node::Kind::Map;
        // A set, not Node::find, to catch a repeated key: a linear search per
        // key made a map of 100k keys take 36 s.
        std::unordered_set<std::string> seen;
        for (auto it = y.begin(); it != y.end(); ++it) {
          if (!it->first.IsScalar()) {
            throw InputError(fmt::format("{}: a map key must be a plain name", where(source, it->first.Mark())));
          }
          std::string key = it->first.Scalar();
          std::string key_origin = where(source, it->first.Mark());
          if (!seen.insert(key).second) {
            throw InputError(fmt::format("{}: key '{}' is given twice in the same map; give it once", key_origin, key));
          }
          n.entries.emplace_back(key, convert(it->second, key_origin, depth + 1));
        }
        break;
      }
    }
    return n;
  }
};

}  // namespace

Node parse_yaml(std::string_view text, const std::string& source) {
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw InputError(fmt::format("{}:{}: a NUL byte; expected a YAML text file", source, line));
  }
  // A second document ('---' at the start of a line after content) would be
  // ignored by YAML::Load. It is found in the text: yaml-cpp 0.7's LoadAll
  // loops forever on a stray ',' (found by fuzz/dlio_yaml_fuzz.cpp).
  bool content = false;
  {
    std::size_t line = 1;
    for (std::size_t start = 0; start < text.size(); ++line) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view l = text.substr(start, end - start);
      const bool marker = l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
      if (marker && content)
        throw InputError(
            fmt::format("{}:{}: a second YAML document ('---'); expected one workload per file", source, line));
      const auto first = l.find_first_not_of(" \t\r");
      if (!marker && first != std::string_view::npos && l[first] != '#' && l[first] != '%') content = true;
      start = end + 1;
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(
        fmt::format("{}: values nested too deeply for the YAML reader; expected a DLIO workload, which "
                    "nests 4 deep",
                    where(source, e.mark)));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: not valid YAML: {}", where(source, e.mark), e.msg));
  }
  // yaml-cpp reads a text that opens with a stray ',' as an empty document;
  // the workload would silently be DLIO's defaults.
  if (root.IsNull() && content)
    throw InputError(
        fmt::format("{}: no YAML value could be read from the text (a stray ',' at the start stops the "
                    "reader); expected a DLIO workload such as configs/dlio/unet3d_a100.yaml",
                    source));
  return Converter{source}.convert(root, source, 0);
}

void set_origin(Node& node, const std::string& origin) {
  node.origin = origin;
  for (Node& item : node.items) set_origin(item, origin);
  for (auto& [k, v] : node.entries) set_origin(v, origin);
}

Node parse_override_value(std::string_view text, const std::string& origin) {
  if (text.empty()) {
    Node n = Node::make_scalar("", origin);
    n.quoted = true;
    return n;
  }
  YAML::Node y;
  try {
    y = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw InputError(
        fmt::format("{}: the value '{}' is not valid (hydra/YAML value syntax: 4, 1.5, true, "
                    "abc, 'quoted text', [1, 2], {{mean: 1, stdev: 0.1}}): {}",
                    origin, text, e.msg));
  }
  Node n = Converter{origin}.convert(y, origin, 0);
  set_origin(n, origin);
  return n;
}

namespace {

// Texts a YAML reader would not read back as the same text: empty, null, and
// YAML 1.1's booleans (PyYAML, and so DLIO, reads `off` as false).
bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const char* const specials[] = {"null", "~", "y", "n", "yes", "no", "on", "off"};
  for (const char* sp : specials) {
    if (lower == sp) return true;
  }
  return false;
}

void emit(YAML::Emitter& out, const Node& n, bool flow) {
  switch (n.kind) {
    case Node::Kind::Null: out << YAML::Null; break;
    case Node::Kind::Scalar:
      if (n.quoted || needs_quotes(n.scalar)) {
        out << YAML::DoubleQuoted << n.scalar;
      } else {
        out << n.scalar;
      }
      break;
    case Node::Kind::List:
      out << YAML::Flow << YAML::BeginSeq;
      for (const Node& item : n.items) emit(out, item, true);
      out << YAML::EndSeq;
      break;
    case Node::Kind::Map:
      if (flow) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [k, v] : n.entries) {
        out << YAML::Key << k << YAML::Value;
        emit(out, v, flow);
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string emit_yaml(const Node& root) {
  YAML::Emitter out;
  emit(out, root, false);
  return std::string(out.c_str()) + "\n";
}

std::string describe(const Node& node) {
  switch (node.kind) {
    case Node::Kind::Null: return "null";
    case Node::Kind::Scalar: return printable_excerpt(node.scalar, 80);
    case Node::Kind::List: return "[...]";
    case Node::Kind::Map: return "{...}";
  }
  return "";
}

std::string inline_text(const Node& n) {
  switch (n.kind) {
    case Node::Kind::Null: return "null";
    case Node::Kind::Scalar: return n.scalar.empty() ? "\"\"" : n.scalar;
    case Node::Kind::List: {
      std::string out = "[";
      for (std::size_t i = 0; i < n.items.size(); ++i) out += (i ? ", " : "") + inline_text(n.items[i]);
      return out + "]";
    }
    case Node::Kind::Map: {
      std::string out = "{";
      for (std::size_t i = 0; i < n.entries.size(); ++i) {
        out += (i ? ", " : "") + n.entries[i].first + ": " + inline_text(n.entries[i].second);
      }
      return out + "}";
    }
  }
  return "";
}

}  // namespace gpemu::dlio::detail

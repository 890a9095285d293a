#include "dlio/tree.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include <fmt/format.h>

#include "gpemu/error.h"

namespace gpemu::dlio::detail {

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

Node convert(const YAML::Node& y, const std::string& source, const std::string& origin) {
  Node n;
  n.origin = origin;
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      n.kind = Node::Kind::Null;
      break;
    case YAML::NodeType::Scalar:
      n.kind = Node::Kind::Scalar;
      n.scalar = y.Scalar();
      n.quoted = y.Tag() == "!";
      break;
    case YAML::NodeType::Sequence:
      n.kind = Node::Kind::List;
      for (const YAML::Node& item : y) {
        n.items.push_back(convert(item, source, origin.empty() ? origin : where(source, item.Mark())));
      }
      break;
    case YAML::NodeType::Map:
      n.kind = Node::Kind::Map;
      for (auto it = y.begin(); it != y.end(); ++it) {
        if (!it->first.IsScalar()) {
          throw InputError(fmt::format("{}: a map key must be a plain name", where(source, it->first.Mark())));
        }
        std::string key = it->first.Scalar();
        std::string key_origin = where(source, it->first.Mark());
        if (n.find(key) != nullptr) {
          throw InputError(fmt::format("{}: key '{}' is given twice in the same map; give it once",
                                       key_origin, key));
        }
        n.entries.emplace_back(key, convert(it->second, source, key_origin));
      }
      break;
  }
  return n;
}

}  // namespace

Node parse_yaml(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: not valid YAML: {}", where(source, e.mark), e.msg));
  }
  return convert(root, source, source);
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
    throw InputError(fmt::format("{}: the value '{}' is not valid (hydra/YAML value syntax: 4, 1.5, true, "
                                 "abc, 'quoted text', [1, 2], {{mean: 1, stdev: 0.1}}): {}",
                                 origin, text, e.msg));
  }
  Node n = convert(y, origin, origin);
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
    case Node::Kind::Null:
      out << YAML::Null;
      break;
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
    case Node::Kind::Scalar: return node.scalar;
    case Node::Kind::List: return "[...]";
    case Node::Kind::Map: return "{...}";
  }
  return "";
}

}  // namespace gpemu::dlio::detail

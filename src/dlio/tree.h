// Internal: a plain tree of YAML values with where each came from, so that the
// DLIO parser can apply hydra overrides and name file lines in its errors
// without mutating yaml-cpp nodes (whose assignment semantics alias).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpemu::dlio::detail {

struct Node {
  enum class Kind { Null, Scalar, List, Map };
  Kind kind = Kind::Null;
  std::string scalar;                                 // Scalar
  bool quoted = false;                                // Scalar written in quotes
  std::vector<Node> items;                            // List
  std::vector<std::pair<std::string, Node>> entries;  // Map, in file order
  std::string origin;                                 // "file.yaml:12" or "override '...'"

  // Defined in tree.cpp, where Node is complete: clang with libstdc++ (the
  // fuzz build) refuses to instantiate them for the recursive members here.
  Node();
  ~Node();
  Node(const Node&);
  Node(Node&&) noexcept;
  Node& operator=(const Node&);
  Node& operator=(Node&&) noexcept;

  bool is_map() const { return kind == Kind::Map; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_list() const { return kind == Kind::List; }
  bool is_null() const { return kind == Kind::Null; }

  const Node* find(std::string_view key) const;
  Node* find(std::string_view key);
  // Removes the entry; false when absent.
  bool erase(std::string_view key);
  // The entry, appended (as Null) when absent.
  Node& at_or_add(std::string_view key);

  static Node make_scalar(std::string text, std::string origin = {});
  static Node make_map(std::string origin = {});
};

// Parses YAML text. Throws InputError naming `source` and the line on a syntax
// error or a key given twice in one map.
Node parse_yaml(std::string_view text, const std::string& source);
// Parses the value of a command-line override (flow YAML: 4, 1.5, true, abc,
// 'quoted', [1, 2], {mean: 1, stdev: 0.1}; empty text is an empty string).
Node parse_override_value(std::string_view text, const std::string& origin);
// Sets `origin` on a node and everything below it.
void set_origin(Node& node, const std::string& origin);

// YAML text of a tree (for to_yaml).
std::string emit_yaml(const Node& root);

// Short form of a value for messages: the scalar text, "[...]", "{...}" or "null".
std::string describe(const Node& node);

// Inline YAML-ish text of a value, for messages and key listings.
std::string inline_text(const Node& n);

}  // namespace gpemu::dlio::detail

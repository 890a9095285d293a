// Internal: the table of every DLIO key gpemu accepts, with its type, range,
// default and whether gpemu acts on it. Parsing, validation, to_yaml and
// dlio_keys() are all driven by this one table.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dlio/tree.h"
#include "gpemu/dlio.h"

namespace gpemu::dlio::detail {

struct FieldSpec {
  std::string name;      // key within its section
  std::string path;      // full path, e.g. "output.metric.exclude_start_steps"
  std::string accepted;  // what values are accepted, for messages and docs
  bool emulated = true;  // false: accepted and recorded in not_emulated only
  std::string alias_of;  // full path of the canonical key; empty for canonical keys
  // Converts `value` and stores it; throws InputError naming `shown_path`.
  std::function<void(DlioWorkload&, const Node& value, const std::string& shown_path)> set;
  // The current value (canonical keys only).
  std::function<Node(const DlioWorkload&)> get;
  // Range check of the current value (canonical keys only; empty = always valid).
  std::function<bool(const DlioWorkload&)> valid;
};

struct SectionSpec {
  std::string name;                  // key within its parent ("" for the root)
  std::string path;                  // full path ("" for the root)
  std::vector<std::string> aliases;  // other spellings of the section name
  bool opaque = false;               // anything below is accepted, not emulated
  // When the section may be written as a plain value (`model: resnet50`):
  // the key that value sets.
  std::string scalar_key;
  std::vector<FieldSpec> fields;
  std::vector<SectionSpec> sections;

  const FieldSpec* field(std::string_view key) const;
  const SectionSpec* section(std::string_view key) const;  // aliases too
};

// The root: `framework` as a field, every other section as a subsection.
const SectionSpec& schema();
// A canonical field by full path; nullptr when there is none.
const FieldSpec* find_field(std::string_view path);

// Throws InputError "<origin>: <path> = <value> is not valid; accepted: <accepted>".
[[noreturn]] void bad_value(const Node& value, const std::string& path, const std::string& accepted,
                            const std::string& detail = {});

std::size_t edit_distance(std::string_view a, std::string_view b);

// Where a key's value came from: the file and line or the override that set
// it, else "<source> (default)".
std::string key_origin(const DlioWorkload& w, const std::string& path);
// Throws InputError "<key_origin>: <path> = <value> is not valid; accepted: <accepted>".
[[noreturn]] void invalid(const DlioWorkload& w, const std::string& path, const std::string& value,
                          const std::string& accepted);

}  // namespace gpemu::dlio::detail

// A spec's field that breaks the engine's rules, named as the spec names it
// ("cluster.gpus"), never in a front end's words. Each front end words it its
// way in one place: the CLI by its flags, DLIO by its YAML keys, Python by its
// keywords (docs/architecture.md, "Front ends only translate").
#pragma once

#include <exception>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gpemu/error.h"

namespace gpemu {

// A front end's word for a spec field ("cluster.gpus" -> "--gpus"), or "" when
// it has none (the spec's name is then printed).
using SpecFieldNames = std::function<std::string(std::string_view field)>;

class SpecError : public InputError {
 public:
  // what(): "job: FIELD VALUE is impossible: RULE", or "job: FIELD RULE" when
  // VALUE is empty ("job: cluster.gpu is missing; give ..."). RULE names other
  // fields through spec_field() so that a front end words them too.
  SpecError(std::string field, std::string value, std::string rule);

  const std::string& field() const { return field_; }  // the spec's path, "cluster.gpus"
  const std::string& value() const { return value_; }  // as text, "0"; "" when the rule says it all
  // The message with every field in `names`' words (a field it has none for
  // keeps the spec's name), without "job: ": "--gpus 0 is impossible: ...".
  std::string worded(const SpecFieldNames& names) const;
  // The same error with the fields `names` has words for named by them, for
  // good; the rest still open to a later front end (DLIO's keys, then the CLI's flags).
  SpecError renamed(const SpecFieldNames& names) const;

 private:
  SpecError(std::string field, std::string value, std::string text, int);
  std::string field_, value_;
  std::string text_;  // the sentence, fields marked as spec_field() marks them
};

// What a front end prints for `e`: a SpecError worded by `names` (without
// "job: "), any other error's what() as it is.
std::string worded_message(const std::exception& e, const SpecFieldNames& names);

// A field named inside a rule's text, marked for SpecError's wording.
std::string spec_field(std::string_view field);

// A front end's table of words: {spec field, its word} pairs.
using SpecFieldWord = std::pair<std::string_view, std::string_view>;
// The word `table` gives `field`, or "" when it has none.
std::string word_of_spec_field(std::span<const SpecFieldWord> table, std::string_view field);

}  // namespace gpemu

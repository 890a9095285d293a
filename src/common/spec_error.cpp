// SpecError's wording: the fields in its sentence are marked ("\x1f" on both
// sides) and each front end's names replace them. include/gpemu/spec_error.h.
#include "gpemu/spec_error.h"

#include <utility>

namespace gpemu {

namespace {

constexpr char kMark = '\x1f';

// The text with each marked field given by `word(field, &marked)`; `marked`
// says whether the word stays marked (a later front end may still name it).
template <typename Word>
std::string replace_fields(const std::string& text, Word word) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t open = text.find(kMark, at);
    const std::size_t close = open == std::string::npos ? open : text.find(kMark, open + 1);
    if (close == std::string::npos) {
      out.append(text, at, std::string::npos);
      break;
    }
    out.append(text, at, open - at);
    out += word(std::string_view(text).substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return out;
}

std::string sentence(const std::string& field, const std::string& value, const std::string& rule) {
  return value.empty() ? spec_field(field) + " " + rule : spec_field(field) + " " + value + " is impossible: " + rule;
}

}  // namespace

std::string worded_message(const std::exception& e, const SpecFieldNames& names) {
  const auto* spec = dynamic_cast<const SpecError*>(&e);
  return spec ? spec->worded(names) : e.what();
}

std::string spec_field(std::string_view field) { return kMark + std::string(field) + kMark; }

std::string word_of_spec_field(std::span<const SpecFieldWord> table, std::string_view field) {
  for (const auto& [spec, word] : table)
    if (spec == field) return std::string(word);
  return "";
}

SpecError::SpecError(std::string field, std::string value, std::string rule)
    : SpecError(field, value, sentence(field, value, rule), 0) {}

SpecError::SpecError(std::string field, std::string value, std::string text, int)
    : InputError("job: " + replace_fields(text, [](std::string_view f) { return std::string(f); })),
      field_(std::move(field)),
      value_(std::move(value)),
      text_(std::move(text)) {}

std::string SpecError::worded(const SpecFieldNames& names) const {
  return replace_fields(text_, [&](std::string_view f) {
    std::string word = names(f);
    return word.empty() ? std::string(f) : word;
  });
}

SpecError SpecError::renamed(const SpecFieldNames& names) const {
  std::string text = replace_fields(text_, [&](std::string_view f) {
    std::string word = names(f);
    return word.empty() ? spec_field(f) : word;
  });
  return SpecError(field_, value_, std::move(text), 0);
}

}  // namespace gpemu

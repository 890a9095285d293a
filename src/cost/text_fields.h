// The profile readers' text fields: the shared parsers (common/text_fields.h)
// and the batch sizes that profile files hold.
#pragma once

#include <optional>
#include <string_view>

#include "common/text_fields.h"

namespace gpemu::cost_detail {

using text::join;
using text::kMaxTextFileBytes;
using text::parse_number;
using text::quoted_excerpt;
using text::read_text_file;
using text::split_csv;
using text::split_lines;
using text::to_lower;
using text::trim;

// A whole number >= 1, possibly written as a float ("64", "64.0").
std::optional<int> parse_batch_size(std::string_view s);
// The same for a value already read as a double.
std::optional<int> batch_size_from_double(double v);

}  // namespace gpemu::cost_detail

#include "cost/text_fields.h"

#include <cmath>
#include <limits>

namespace gpemu::cost_detail {

std::optional<int> batch_size_from_double(double v) {
  if (!std::isfinite(v) || v < 1 || v > std::numeric_limits<int>::max() || v != std::floor(v)) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<int> parse_batch_size(std::string_view s) {
  auto v = parse_number(s);
  if (!v) return std::nullopt;
  return batch_size_from_double(*v);
}

}  // namespace gpemu::cost_detail

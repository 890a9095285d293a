#include "pipeline/random.h"

#include <cmath>
#include <numbers>

namespace gpemu::pipeline::detail {

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace gpemu::pipeline::detail

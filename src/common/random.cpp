#include "common/random.h"

#include <cmath>
#include <numbers>

namespace gpemu::common {

double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::normal() {
  // uniform() can return 0, whose logarithm is -inf: draw again.
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return box_muller(u1, u2);
}

}  // namespace gpemu::common

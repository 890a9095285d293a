// The least-squares machinery the calibration fits share: Levenberg-Marquardt
// on a residual vector, and the pseudo-Huber residual of a log error.
#pragma once

#include <functional>
#include <vector>

namespace gpemu::cost_detail {

using ResidualFn = std::function<void(const std::vector<double>& x, std::vector<double>& r)>;

// Minimises |r(x)|^2 by Levenberg-Marquardt with a forward-difference
// Jacobian; x is clamped to [lo, hi].
std::vector<double> levenberg_marquardt(const ResidualFn& fn, std::vector<double> x, const std::vector<double>& lo,
                                        const std::vector<double>& hi, int max_iterations);

// The pseudo-Huber loss of a log error `e` with scale `c`, as a residual
// whose square is the loss (c <= 0: e itself).
double robust_residual(double e, double c);

}  // namespace gpemu::cost_detail

// A dense simplex for the max-min LP of max_min_lp.h. Every constraint is
// "<= b" with b >= 0, so the slack variables are a feasible first basis.
#include "cluster/max_min_lp.h"

#include <cmath>
#include <stdexcept>

namespace gpemu::cluster::detail {

std::vector<std::vector<double>> solve_max_min(const std::vector<std::vector<double>>& c,
                                               const std::vector<double>& scale, const std::vector<double>& workers,
                                               double epsilon) {
  const std::size_t n = c.size(), k = workers.size();
  const std::size_t vars = n * k + 1;  // x[m][j] at m * k + j, then t
  const std::size_t rows = 2 * n + k;
  const std::size_t cols = vars + rows + 1;  // then the slacks, then the right-hand side
  const std::size_t t = n * k, rhs = cols - 1;
  std::vector<double> a(rows * cols, 0.0);
  const auto at = [&](std::size_t r, std::size_t col) -> double& { return a[r * cols + col]; };
  for (std::size_t m = 0; m < n; ++m) {
    at(m, t) = 1;  // t - sum_j c x <= 0
    for (std::size_t j = 0; j < k; ++j) at(m, m * k + j) = -c[m][j];
    for (std::size_t j = 0; j < k; ++j) at(n + m, m * k + j) = 1;  // sum_j x <= 1
    at(n + m, rhs) = 1;
  }
  for (std::size_t j = 0; j < k; ++j) {
    for (std::size_t m = 0; m < n; ++m) at(2 * n + j, m * k + j) = scale[m];
    at(2 * n + j, rhs) = workers[j];
  }
  for (std::size_t r = 0; r < rows; ++r) at(r, vars + r) = 1;
  // The objective row holds the reduced costs to maximise.
  std::vector<double> z(cols, 0.0);
  z[t] = 1;
  for (std::size_t m = 0; m < n; ++m)
    for (std::size_t j = 0; j < k; ++j) z[m * k + j] = epsilon * c[m][j];
  std::vector<std::size_t> basis(rows);
  for (std::size_t r = 0; r < rows; ++r) basis[r] = vars + r;
  constexpr double kEps = 1e-12;
  for (std::size_t pivots = 0;; ++pivots) {
    if (pivots > 100 * (rows + cols)) throw std::logic_error("solve_max_min: the simplex did not end");
    std::size_t enter = cols;
    for (std::size_t col = 0; col < rhs && enter == cols; ++col)
      if (z[col] > kEps) enter = col;  // Bland: the lowest index that improves
    if (enter == cols) break;
    std::size_t leave = rows;
    double best = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      if (at(r, enter) <= kEps) continue;
      const double ratio = at(r, rhs) / at(r, enter);
      if (leave == rows || ratio < best - kEps || (std::fabs(ratio - best) <= kEps && basis[r] < basis[leave]))
        leave = r, best = ratio;
    }
    if (leave == rows) throw std::logic_error("solve_max_min: unbounded (a job with no throughput bound)");
    const double p = at(leave, enter);
    for (std::size_t col = 0; col < cols; ++col) at(leave, col) /= p;
    for (std::size_t r = 0; r < rows; ++r) {
      const double f = at(r, enter);
      if (r == leave || f == 0) continue;
      for (std::size_t col = 0; col < cols; ++col) at(r, col) -= f * at(leave, col);
    }
    const double f = z[enter];
    for (std::size_t col = 0; col < cols; ++col) z[col] -= f * at(leave, col);
    basis[leave] = enter;
  }
  std::vector<std::vector<double>> x(n, std::vector<double>(k, 0.0));
  for (std::size_t r = 0; r < rows; ++r)
    if (basis[r] < t) x[basis[r] / k][basis[r] % k] = std::max(0.0, at(r, rhs));
  return x;
}

}  // namespace gpemu::cluster::detail

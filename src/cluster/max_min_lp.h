// The linear program of Gavel's heterogeneity-aware max-min fairness
// (policy_max_min_perf.cpp), solved by a dense simplex: the matrices are
// small (active jobs x GPU models), so no LP library is needed.
#pragma once

#include <cstddef>
#include <vector>

namespace gpemu::cluster::detail {

// Maximises t + epsilon x sum_{m,j} c[m][j] x[m][j] over x >= 0 subject to
//   t <= sum_j c[m][j] x[m][j]         for every job m (its normalised throughput)
//   sum_j x[m][j] <= 1                  for every job m (time fractions)
//   sum_m scale[m] x[m][j] <= workers[j] for every GPU model j
// (Gavel's MaxMinFairnessPolicyWithPerf; the small epsilon term picks,
// among allocations within it of the least throughput's best, one that
// uses the GPUs). Returns x, one row per job. Bland's rule: it terminates.
std::vector<std::vector<double>> solve_max_min(const std::vector<std::vector<double>>& c,
                                               const std::vector<double>& scale, const std::vector<double>& workers,
                                               double epsilon = 1e-6);

}  // namespace gpemu::cluster::detail

// Summary statistics of a sample: mean, median, nearest-rank percentiles and
// standard deviation, each defined once so every report computes them alike.
// An empty sample gives 0 for each (callers print "no samples" themselves
// where that matters).
#pragma once

#include <vector>

namespace gpemu::common {

double mean(const std::vector<double>& samples);
// The middle value; the mean of the two middle values for an even count.
double median(std::vector<double> samples);
// The p-th percentile (0..100) by nearest rank: the smallest sample with at
// least p% of the samples <= it. Always one of the samples.
double percentile(std::vector<double> samples, double p);
// Population standard deviation (divides by n, not n - 1).
double stdev(const std::vector<double>& samples);

}  // namespace gpemu::common

#include "gpemu/pipeline/transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipeline/random.h"

namespace gpemu::pipeline {

Augmentation draw_augmentation(int image_width, int image_height, const ImageTransformOptions& o,
                               std::uint64_t sample_seed) {
  detail::Rng rng(sample_seed);
  Augmentation a;
  const double W = image_width, H = image_height, area = W * H;
  const double log_r0 = std::log(o.ratio_min), log_r1 = std::log(o.ratio_max);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * rng.uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.uniform(log_r0, log_r1));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= image_width && h <= image_height) {
      a.box = {static_cast<int>(rng.below(static_cast<std::uint64_t>(image_width - w + 1))),
               static_cast<int>(rng.below(static_cast<std::uint64_t>(image_height - h + 1))), w, h};
      found = true;
    }
  }
  if (!found) {  // centre crop with the aspect ratio clamped into range
    const double in_ratio = W / H;
    int w = image_width, h = image_height;
    if (in_ratio < o.ratio_min) {
      h = static_cast<int>(std::lround(W / o.ratio_min));
    } else if (in_ratio > o.ratio_max) {
      w = static_cast<int>(std::lround(H * o.ratio_max));
    }
    w = std::clamp(w, 1, image_width);
    h = std::clamp(h, 1, image_height);
    a.box = {(image_width - w) / 2, (image_height - h) / 2, w, h};
  }
  a.flip = rng.uniform() < o.flip_probability;
  return a;
}

namespace {

// Filter taps of a separable antialiased bilinear resize of the source
// interval [start, start + length) onto `out` pixels, clamped to [0, in).
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weight;  // out * max_taps
  int max_taps = 0;
};

void make_taps(double start, double length, int in, int out, Taps& t) {
  const double scale = length / out;
  const double fscale = std::max(1.0, scale);
  const double support = fscale;  // triangle filter of radius 1, widened when shrinking
  t.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.assign(out, 0);
  t.count.assign(out, 0);
  t.weight.assign(static_cast<std::size_t>(out) * t.max_taps, 0.0f);
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    int lo = std::max(0, static_cast<int>(std::floor(center - support)));
    int hi = std::min(in, static_cast<int>(std::ceil(center + support)));
    if (hi - lo > t.max_taps) hi = lo + t.max_taps;
    double sum = 0;
    float* w = &t.weight[static_cast<std::size_t>(i) * t.max_taps];
    for (int j = lo; j < hi; ++j) {
      const double d = std::abs((j + 0.5 - center) / fscale);
      const double v = d < 1.0 ? 1.0 - d : 0.0;
      w[j - lo] = static_cast<float>(v);
      sum += v;
    }
    if (sum <= 0) {  // degenerate: nearest pixel
      lo = std::clamp(static_cast<int>(center), 0, in - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      sum = 1.0;
    }
    for (int j = 0; j < hi - lo; ++j) w[j] = static_cast<float>(w[j] / sum);
    t.first[i] = lo;
    t.count[i] = hi - lo;
  }
}

}  // namespace

void resize_normalize(const DecodedCrop& crop, bool flip, const ImageTransformOptions& o, float* out) {
  thread_local Taps tx, ty;
  thread_local std::vector<float> rows, acc;
  const int OW = o.width, OH = o.height;
  make_taps(crop.box_x, crop.box_width, crop.region_width, OW, tx);
  make_taps(crop.box_y, crop.box_height, crop.region_height, OH, ty);

  const int y_lo = ty.first.front();
  const int y_hi = ty.first.back() + ty.count.back();
  const std::size_t row_len = static_cast<std::size_t>(OW) * 3;
  rows.resize(row_len * static_cast<std::size_t>(y_hi - y_lo));
  // Horizontal pass over the source rows the vertical filter will need.
  for (int y = y_lo; y < y_hi; ++y) {
    const std::uint8_t* src = crop.rgb + static_cast<std::size_t>(y) * crop.stride;
    float* dst = &rows[static_cast<std::size_t>(y - y_lo) * row_len];
    for (int x = 0; x < OW; ++x) {
      const float* w = &tx.weight[static_cast<std::size_t>(x) * tx.max_taps];
      const std::uint8_t* p = src + static_cast<std::size_t>(tx.first[x]) * 3;
      float r = 0, g = 0, b = 0;
      for (int k = 0; k < tx.count[x]; ++k, p += 3) {
        r += w[k] * p[0];
        g += w[k] * p[1];
        b += w[k] * p[2];
      }
      dst[x * 3 + 0] = r;
      dst[x * 3 + 1] = g;
      dst[x * 3 + 2] = b;
    }
  }
  // Vertical pass, then flip and normalise into CHW.
  float scale[3], bias[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * o.std[c]);
    bias[c] = -o.mean[c] / o.std[c];
  }
  acc.resize(row_len);
  const std::size_t plane = static_cast<std::size_t>(OW) * OH;
  for (int y = 0; y < OH; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* w = &ty.weight[static_cast<std::size_t>(y) * ty.max_taps];
    float* __restrict a = acc.data();
    for (int k = 0; k < ty.count[y]; ++k) {
      const float* __restrict src = &rows[static_cast<std::size_t>(ty.first[y] + k - y_lo) * row_len];
      const float wk = w[k];
      for (std::size_t i = 0; i < row_len; ++i) a[i] += wk * src[i];
    }
    for (int c = 0; c < 3; ++c) {
      float* __restrict dst = out + c * plane + static_cast<std::size_t>(y) * OW;
      if (flip) {
        for (int x = 0; x < OW; ++x) dst[OW - 1 - x] = a[x * 3 + c] * scale[c] + bias[c];
      } else {
        for (int x = 0; x < OW; ++x) dst[x] = a[x * 3 + c] * scale[c] + bias[c];
      }
    }
  }
}

}  // namespace gpemu::pipeline

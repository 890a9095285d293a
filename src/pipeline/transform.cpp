#include "gpemu/pipeline.h"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "common/random.h"

namespace gpemu::pipeline {

Augmentation draw_augmentation(int image_width, int image_height, const ImageTransformOptions& o,
                               std::uint64_t sample_seed) {
  common::Rng rng(sample_seed);
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

// Four float lanes: R, G, B and a padding lane, so one pixel is one SSE
// register (GCC/Clang vector extension; plain SSE2 at -march=x86-64).
typedef float Px __attribute__((vector_size(16)));

// Vertical pass for one output row: dst[i] = sum_k w[k] * src_k[i] over n
// bytes of n_taps source rows `stride` apart. Vectorised by the compiler.
void filter_rows(const std::uint8_t* __restrict src, std::size_t stride, const float* __restrict w, int n_taps,
                 std::size_t n, float* __restrict dst) {
  const float w0 = w[0];
  for (std::size_t i = 0; i < n; ++i) dst[i] = w0 * static_cast<float>(src[i]);
  for (int k = 1; k < n_taps; ++k) {
    const std::uint8_t* __restrict s = src + static_cast<std::size_t>(k) * stride;
    const float wk = w[k];
    for (std::size_t i = 0; i < n; ++i) dst[i] += wk * static_cast<float>(s[i]);
  }
}

// One output pixel of the horizontal pass: the weighted sum of its taps,
// T of them (padded with zero weights) or, for T == 0, exactly count.
template <int T>
inline Px tap_sum(const Px* p, const float* w, int count) {
  Px acc = p[0] * w[0];
  if constexpr (T > 0) {
    for (int k = 1; k < T; ++k) acc += p[k] * w[k];
  } else {
    for (int k = 1; k < count; ++k) acc += p[k] * w[k];
  }
  return acc;
}

// Horizontal pass of one output row from the vertically filtered RGBX line
// (whose first pixel is source column x_lo), normalised, mirrored when
// flip, written to row r of the R plane and the same row of the G and B
// planes (`plane` floats apart).
template <int T>
void horizontal(const Px* line, int x_lo, const Taps& tx, int OW, Px scale, Px bias, bool flip, float* r,
                std::size_t plane) {
  float* g = r + plane;
  float* b = g + plane;
  const int taps = tx.max_taps;
  auto pixel = [&](int x) {
    const Px acc = tap_sum<T>(line + (tx.first[x] - x_lo), &tx.weight[static_cast<std::size_t>(x) * taps], tx.count[x]);
    return acc * scale + bias;
  };
  int x = 0;
#if defined(__SSE2__)
  // Four pixels at a time, transposed from RGBX lanes into four-pixel runs
  // of each channel.
  for (; x + 4 <= OW; x += 4) {
    __m128 p0 = pixel(x), p1 = pixel(x + 1), p2 = pixel(x + 2), p3 = pixel(x + 3);
    _MM_TRANSPOSE4_PS(p0, p1, p2, p3);  // p0: R of x..x+3, p1: G, p2: B
    if (flip) {
      const int o = OW - 4 - x;
      _mm_storeu_ps(r + o, _mm_shuffle_ps(p0, p0, _MM_SHUFFLE(0, 1, 2, 3)));
      _mm_storeu_ps(g + o, _mm_shuffle_ps(p1, p1, _MM_SHUFFLE(0, 1, 2, 3)));
      _mm_storeu_ps(b + o, _mm_shuffle_ps(p2, p2, _MM_SHUFFLE(0, 1, 2, 3)));
    } else {
      _mm_storeu_ps(r + x, p0);
      _mm_storeu_ps(g + x, p1);
      _mm_storeu_ps(b + x, p2);
    }
  }
#endif
  for (; x < OW; ++x) {
    const Px v = pixel(x);
    const int o = flip ? OW - 1 - x : x;
    r[o] = v[0];
    g[o] = v[1];
    b[o] = v[2];
  }
}

}  // namespace

void resize_normalize(const DecodedCrop& crop, bool flip, const ImageTransformOptions& o, float* out) {
  thread_local Taps tx, ty;
  thread_local std::vector<Px> line;
  thread_local std::vector<std::uint8_t> rgbx;
  const int OW = o.width, OH = o.height;
  make_taps(crop.box_x, crop.box_width, crop.region_width, OW, tx);
  make_taps(crop.box_y, crop.box_height, crop.region_height, OH, ty);

  // The source columns the horizontal filter reads.
  int x_lo = crop.region_width, x_hi = 0;
  for (int x = 0; x < OW; ++x) {
    x_lo = std::min(x_lo, tx.first[x]);
    x_hi = std::max(x_hi, tx.first[x] + tx.count[x]);
  }
  const std::uint8_t* src = crop.rgb;
  std::size_t stride = static_cast<std::size_t>(crop.stride);
  if (crop.pixel_bytes != 4) {  // RGB: widen to RGBX once
    stride = static_cast<std::size_t>(crop.region_width) * 4;
    rgbx.resize(stride * crop.region_height);
    for (int y = 0; y < crop.region_height; ++y) {
      const std::uint8_t* s = crop.rgb + static_cast<std::size_t>(y) * crop.stride;
      std::uint8_t* d = &rgbx[static_cast<std::size_t>(y) * stride];
      for (int x = 0; x < crop.region_width; ++x, s += crop.pixel_bytes, d += 4) {
        d[0] = s[0];
        d[1] = s[1];
        d[2] = s[2];
        d[3] = 0;
      }
    }
    src = rgbx.data();
  }
  src += static_cast<std::size_t>(x_lo) * 4;
  const std::size_t n = static_cast<std::size_t>(x_hi - x_lo) * 4;
  // max_taps zero pixels after the columns: the fixed-length tap loops read
  // up to max_taps pixels from each output's first tap (the extra weights are 0).
  line.assign(static_cast<std::size_t>(x_hi - x_lo + tx.max_taps), Px{0, 0, 0, 0});
  float* line_f = reinterpret_cast<float*>(line.data());

  // (v / 255 - mean) / std = v * scale + bias, per channel.
  Px scale = {0, 0, 0, 0}, bias = {0, 0, 0, 0};
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * o.std[c]);
    bias[c] = -o.mean[c] / o.std[c];
  }
  const std::size_t plane = static_cast<std::size_t>(OW) * OH;
  for (int y = 0; y < OH; ++y) {
    // Vertical pass over the columns needed, then the horizontal pass with
    // normalisation and flip, written straight into the three CHW planes.
    filter_rows(src + static_cast<std::size_t>(ty.first[y]) * stride, stride,
                &ty.weight[static_cast<std::size_t>(y) * ty.max_taps], ty.count[y], n, line_f);
    float* r = out + static_cast<std::size_t>(y) * OW;
    switch (tx.max_taps) {
      case 3: horizontal<3>(line.data(), x_lo, tx, OW, scale, bias, flip, r, plane); break;
      case 5: horizontal<5>(line.data(), x_lo, tx, OW, scale, bias, flip, r, plane); break;
      case 7: horizontal<7>(line.data(), x_lo, tx, OW, scale, bias, flip, r, plane); break;
      default: horizontal<0>(line.data(), x_lo, tx, OW, scale, bias, flip, r, plane); break;
    }
  }
}

}  // namespace gpemu::pipeline

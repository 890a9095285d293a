#include "gpemu/pipeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "common/atomic_file.h"
#include "common/fs_errors.h"
#include "common/interrupt.h"
#include "common/random.h"
#include "gpemu/error.h"
#include "pipeline/dataset_folder.h"
#include "pipeline/npy.h"
#include "pipeline/tfrecord.h"

namespace gpemu::pipeline {
namespace fs = std::filesystem;

namespace {

// How often writing or drawing one large record looks for a signal.
constexpr std::size_t kInterruptCheckBytes = std::size_t{64} << 20;

void make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot create folder '" + dir.string() + "': " + ec.message());
}

// Photo-like synthetic images of a requested file size. The pixel count is
// steered by a running estimate of bytes per pixel (corrected after every
// encode), so the sizes' median follows the requested one.
class ImageMaker {
 public:
  explicit ImageMaker(std::uint64_t seed) : rng_(seed) {}

  std::vector<std::byte> make(double target_bytes) {
    const int quality = 70 + static_cast<int>(rng_.below(26));
    const double noise = rng_.uniform(30.0, 80.0);
    static constexpr std::array<double, 8> kAspects = {4.0 / 3, 4.0 / 3, 4.0 / 3, 3.0 / 4,
                                                       3.0 / 2, 2.0 / 3, 1.0,     16.0 / 9};
    const double aspect = kAspects[rng_.below(kAspects.size())];
    const double bpp = model_bpp(quality, noise) * std::exp(log_correction_);
    const double pixels = std::clamp(target_bytes / bpp, 24.0 * 24.0, 5000.0 * 5000.0);
    const int w = std::max(16, static_cast<int>(std::lround(std::sqrt(pixels * aspect))));
    const int h = std::max(16, static_cast<int>(std::lround(pixels / w)));
    render(w, h, noise);
    auto jpeg = encode_jpeg(rgb_.data(), w, h, quality);
    const double predicted = static_cast<double>(w) * h * bpp;
    log_correction_ += 0.3 * (std::log(static_cast<double>(jpeg.size())) - std::log(predicted));
    return jpeg;
  }

  common::Rng& rng() { return rng_; }

 private:
  // Rough bytes per pixel for this content; the running correction absorbs its error.
  static double model_bpp(int quality, double noise) {
    return 0.08 * (1.0 + noise / 5.0) * std::exp((quality - 70) / 14.0);
  }

  void render(int w, int h, double noise) {
    rgb_.resize(static_cast<std::size_t>(w) * h * 3);
    double base[3], gx[3], gy[3];
    for (int c = 0; c < 3; ++c) {
      base[c] = rng_.uniform(40, 200);
      gx[c] = rng_.uniform(-80, 80);
      gy[c] = rng_.uniform(-80, 80);
    }
    for (int y = 0; y < h; ++y) {
      std::uint8_t* row = &rgb_[static_cast<std::size_t>(y) * w * 3];
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) {
          const double v = base[c] + gx[c] * x / w + gy[c] * y / h;
          row[x * 3 + c] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    }
    const int shapes = 3 + static_cast<int>(rng_.below(10));
    for (int s = 0; s < shapes; ++s) {
      const int sw = 1 + static_cast<int>(rng_.below(static_cast<std::uint64_t>(std::max(2, w / 2))));
      const int sh = 1 + static_cast<int>(rng_.below(static_cast<std::uint64_t>(std::max(2, h / 2))));
      const int x0 = static_cast<int>(rng_.below(static_cast<std::uint64_t>(w)));
      const int y0 = static_cast<int>(rng_.below(static_cast<std::uint64_t>(h)));
      const bool ellipse = rng_.below(2) == 0;
      std::uint8_t color[3];
      for (auto& c : color) c = static_cast<std::uint8_t>(rng_.below(256));
      for (int y = y0; y < std::min(h, y0 + sh); ++y) {
        for (int x = x0; x < std::min(w, x0 + sw); ++x) {
          if (ellipse) {
            const double dx = (x - x0 - sw / 2.0) / (sw / 2.0), dy = (y - y0 - sh / 2.0) / (sh / 2.0);
            if (dx * dx + dy * dy > 1.0) continue;
          }
          std::uint8_t* p = &rgb_[(static_cast<std::size_t>(y) * w + x) * 3];
          p[0] = color[0];
          p[1] = color[1];
          p[2] = color[2];
        }
      }
    }
    // Texture: luminance noise plus weaker colour noise, from a cheap per-pixel generator.
    std::uint64_t state = rng_.next() | 1;
    const int amp = std::max(1, static_cast<int>(noise));
    for (std::size_t i = 0; i < rgb_.size(); i += 3) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const int luma = static_cast<int>(state % (2 * amp + 1)) - amp;
      const int chroma = static_cast<int>((state >> 32) % (amp + 1)) - amp / 2;
      for (int c = 0; c < 3; ++c) {
        const int v = rgb_[i + c] + luma + (c == 1 ? chroma : -chroma / 2);
        rgb_[i + c] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }

  common::Rng rng_;
  std::vector<std::uint8_t> rgb_;
  double log_correction_ = 0.0;
};

std::string numbered(std::size_t i, std::size_t n) {
  const int width = static_cast<int>(std::to_string(n).size());
  char buf[64];
  std::snprintf(buf, sizeof buf, "img_%0*zu_of_%zu", width, i, n);
  return buf;
}

}  // namespace

ImageDatasetSummary generate_image_dataset(const fs::path& dir, int num_classes, std::size_t num_images,
                                           std::uint64_t seed, double median_kb) {
  if (num_classes < 1) throw InputError("image dataset generator: num_classes must be >= 1");
  if (!(median_kb > 0.5)) throw InputError("image dataset generator: median_kb must be > 0.5");
  make_dir(dir);
  std::vector<fs::path> class_dirs;
  for (int c = 0; c < num_classes; ++c) {
    char name[32];
    std::snprintf(name, sizeof name, "class_%04d", c);
    class_dirs.push_back(dir / name);
    make_dir(class_dirs.back());
  }
  const double median = median_kb * 1000.0;
  ImageMaker maker(seed);
  for (int probe = 0; probe < 6; ++probe) maker.make(median);  // settle the size estimate

  std::vector<std::uint64_t> sizes;
  sizes.reserve(num_images);
  for (std::size_t i = 0; i < num_images; ++i) {
    throw_if_interrupted();
    // Log-normal sizes: ImageNet's file sizes have a long right tail.
    const double target = std::clamp(median * std::exp(0.6 * maker.rng().normal()), 1000.0, median * 40.0);
    const auto jpeg = maker.make(target);
    char name[32];
    std::snprintf(name, sizeof name, "img_%08zu.JPEG", i);
    write_dataset_file(class_dirs[i % class_dirs.size()] / name, jpeg);
    sizes.push_back(jpeg.size());
  }
  ImageDatasetSummary s;
  s.images = num_images;
  for (auto b : sizes) s.total_bytes += b;
  if (!sizes.empty()) {
    std::sort(sizes.begin(), sizes.end());
    s.median_bytes = sizes[sizes.size() / 2];
    s.p90_bytes = sizes[std::min(sizes.size() - 1, sizes.size() * 9 / 10)];
    s.max_bytes = sizes.back();
  }
  return s;
}

// Each file appears whole (a killed run leaves at most a "*.tmp-<pid>" that no
// reader takes for data), and a failed write carries the OS reason.
void write_dataset_file(const fs::path& path, std::span<const std::byte> head, std::span<const std::byte> body) {
  AtomicFile out(path, "dataset file");
  out.write(head.data(), head.size());
  // In pieces: a SIGTERM took 9.5 s to end a run writing a 3 GB record (H4).
  for (std::size_t at = 0; at < body.size(); at += kInterruptCheckBytes) {
    throw_if_interrupted();
    out.write(body.data() + at, std::min(kInterruptCheckBytes, body.size() - at));
  }
  out.commit();
}

void write_new_dataset_folder(const fs::path& dir, const std::string& what, const std::function<void()>& write) {
  std::error_code ec;
  const bool existed = exists_or_throw(dir, what);
  if (existed) {
    if (!is_folder(dir, what)) throw InputError("'" + dir.string() + "' exists and is not a folder");
    if (!fs::is_empty(dir, ec))
      throw InputError("'" + dir.string() +
                       "' is not empty; give a new or empty folder (a dataset written into it "
                       "would mix with the files there)");
  }
  make_dir(dir);
  const fs::path incomplete = dir / kIncompleteDatasetMarker;
  try {
    write_dataset_file(incomplete, {});
    write();
    fs::remove(incomplete);
  } catch (...) {
    // Only what this call created: the folder was empty or absent.
    if (existed) {
      for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
    } else {
      fs::remove_all(dir, ec);
    }
    throw;
  }
}

ImageDatasetSummary synthesize_image_folder(const fs::path& dir, int num_classes, std::size_t num_images,
                                            std::uint64_t seed, double median_kb) {
  ImageDatasetSummary s;
  write_new_dataset_folder(dir, "dataset synth --out",
                           [&] { s = generate_image_dataset(dir, num_classes, num_images, seed, median_kb); });
  return s;
}

std::vector<std::byte> dlio_record_bytes(std::uint64_t seed, std::size_t file, std::size_t sample,
                                         std::uint64_t record_length) {
  common::Rng rng(common::mix_seed(common::mix_seed(seed, file), sample));
  std::vector<std::byte> out(record_length);
  for (std::size_t i = 0; i < out.size(); i += 8) {
    // A record may be gigabytes: a signal is heard every 64 MiB (H4).
    if (i % kInterruptCheckBytes == 0) throw_if_interrupted();
    const std::uint64_t v = rng.next();
    for (std::size_t k = 0; k < 8 && i + k < out.size(); ++k) out[i + k] = static_cast<std::byte>(v >> (8 * k));
  }
  return out;
}

std::vector<std::string> generate_dlio_dataset(const fs::path& dir, const DlioGeneratorOptions& o) {
  if (o.num_files < 1 || o.samples_per_file < 1 || o.record_length < 1) {
    throw InputError("DLIO generator: num_files, samples_per_file and record_length must be >= 1");
  }
  if (o.format == DlioFormat::Jpeg && o.samples_per_file != 1) {
    throw InputError("DLIO generator: JPEG files hold one sample each; samples_per_file must be 1");
  }
  make_dir(dir);
  std::vector<std::string> paths;
  ImageMaker maker(o.seed);
  for (std::size_t f = 0; f < o.num_files; ++f) {
    throw_if_interrupted();
    std::vector<std::byte> records;
    if (o.format != DlioFormat::Jpeg) {
      records.reserve(o.samples_per_file * o.record_length);
      for (std::size_t s = 0; s < o.samples_per_file; ++s) {
        const auto r = dlio_record_bytes(o.seed, f, s, o.record_length);
        records.insert(records.end(), r.begin(), r.end());
      }
    }
    const std::vector<std::uint64_t> shape = {o.samples_per_file, o.record_length};
    fs::path path = dir / numbered(f, o.num_files);
    switch (o.format) {
      case DlioFormat::Npy:
        path += ".npy";
        write_dataset_file(path, make_npy_header("|u1", shape), records);
        break;
      case DlioFormat::Npz: {
        path += ".npz";
        auto x = make_npy_header("|u1", shape);
        x.insert(x.end(), records.begin(), records.end());
        auto y = make_npy_header("<i8", {o.samples_per_file});
        for (std::size_t s = 0; s < o.samples_per_file; ++s) {
          const auto label = static_cast<std::uint64_t>(s % static_cast<std::size_t>(std::max(1, o.num_classes)));
          for (int k = 0; k < 8; ++k) y.push_back(static_cast<std::byte>(label >> (8 * k)));
        }
        write_stored_zip(path, {{"x.npy", std::move(x)}, {"y.npy", std::move(y)}});
        break;
      }
      case DlioFormat::Raw:
        path += ".bin";
        write_dataset_file(path, records);
        break;
      case DlioFormat::Jpeg:
        path += ".jpg";
        write_dataset_file(path, maker.make(static_cast<double>(o.record_length)));
        break;
      case DlioFormat::Tfrecord: {
        path += ".tfrecord";
        std::vector<std::byte> file;
        for (std::size_t s = 0; s < o.samples_per_file; ++s) {
          const std::span<const std::byte> sample(records.data() + s * o.record_length, o.record_length);
          append_tfrecord(file, example_with_image(sample));
        }
        write_dataset_file(path, file);
        break;
      }
    }
    paths.push_back(path.string());
  }
  return paths;
}

}  // namespace gpemu::pipeline

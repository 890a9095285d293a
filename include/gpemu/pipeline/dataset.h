// Datasets of real files. A Dataset is a list of Samples, each a byte range
// of a file (a whole JPEG, or one fixed-length record inside a .npy/.npz/raw
// file) with an optional label. Opening a dataset lists and stats files (it
// reads the headers of npy/npz files) but reads no sample data; the loader
// does that (loader.h).
//
// Layouts:
//  - ImageFolder (torchvision): root/<class>/.../<image>.jpg; class index =
//    position of the class folder in sorted (byte-wise) order; images sorted by
//    path within a class. Only .jpg/.jpeg files (any case) are samples; other
//    files are counted in ignored_files.
//  - DLIO-style generated files: a folder of .npy, .npz, raw binary or JPEG
//    files. npy/npz files hold an array whose first axis is the sample axis
//    (C order), so each sample is one contiguous record; raw files are
//    concatenated records of a fixed record_length; a JPEG file is one sample.
//  - File list: a text file, one sample per line: `path` or `path<TAB or
//    spaces>label`; relative paths are relative to the list file's folder;
//    blank lines and lines starting with '#' are skipped. .jpg/.jpeg files are
//    images, anything else is read as one byte record of the whole file.
//
// Errors (missing folder, empty dataset, malformed header, a listed file that
// does not exist) are InputError naming the path. Thread safety: a Dataset is
// a value; const access from many threads is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpemu::pipeline {

enum class SampleFormat {
  Jpeg,    // decoded and transformed into a float tensor by the loader
  Bytes,   // delivered as raw bytes; costs its read, no decode
  RawRgb,  // 8-bit RGB pixels, width x height x 3 (an FFCV-style file's raw samples): cropped and transformed as a JPEG
};

// Whether the loader decodes and transforms a sample of this format into an image.
inline bool is_image(SampleFormat f) { return f != SampleFormat::Bytes; }

struct Sample {
  std::string path;
  std::uint64_t offset = 0;  // first byte of the sample in the file
  std::uint64_t length = 0;  // bytes; for whole-file samples, the size when the dataset was opened
  std::int64_t label = -1;   // -1: no label
  SampleFormat format = SampleFormat::Bytes;
  std::uint32_t width = 0, height = 0;  // RawRgb: its pixels
};

struct Dataset {
  std::string root;  // folder or list file it was opened from
  std::vector<Sample> samples;
  std::vector<std::string> classes;  // ImageFolder: class names, index = label
  std::size_t ignored_files = 0;     // files skipped because of their extension
  // Samples per file of a grouped dataset (open_grouped_dataset, grouped()):
  // samples i*k .. i*k + k - 1 are one file, in order; 1 otherwise.
  std::size_t group_size = 1;
  // An FFCV-style file (open_ffcv_file): its page size; 0 otherwise.
  std::uint64_t page_size = 0;

  std::size_t size() const { return samples.size(); }
  // The distinct files behind the samples, in first-use order.
  std::vector<std::string> files() const;
  // Sum of sample lengths.
  std::uint64_t total_bytes() const;
};

// A folder holding this file is a dataset whose generation did not finish
// (synthesize_image_folder, generator.h); open_image_folder refuses it.
inline constexpr const char* kIncompleteDatasetMarker = ".gpemu-incomplete";

Dataset open_image_folder(const std::filesystem::path& root);

enum class DlioFormat { Npy, Npz, Raw, Jpeg, Tfrecord };
std::string_view to_string(DlioFormat f);
// Accepts "npy", "npz", "raw" (also "bin"), "jpeg" (also "jpg"); InputError otherwise.
DlioFormat parse_dlio_format(std::string_view name);

struct DlioOptions {
  DlioFormat format = DlioFormat::Npz;
  // Bytes per sample. Required for Raw; for Npy/Npz it is read from the array
  // header and, when non-zero here, must match it.
  std::uint64_t record_length = 0;
  // File name suffix to pick up; empty means .npy / .npz / .bin / .jpg+.jpeg /
  // .tfrecord. A TFRecord file's samples are its framed records (what
  // TensorFlow's reader reads), the framing checked when the folder is opened.
  std::string extension;
  // Name of the sample array inside an .npz file (DLIO writes "x"); a file
  // without it is an InputError. An int array "y" of one value per sample,
  // when present, gives the labels.
  std::string npz_key = "x";
};

// Files are taken from `dir` only (not its subfolders), sorted by name.
Dataset open_dlio_dataset(const std::filesystem::path& dir, const DlioOptions& options);

Dataset open_file_list(const std::filesystem::path& list_file);

// Grouped datasets (GPEmu's file grouping): `gpemu dataset group` packs a
// dataset's samples `group_size` to a file, so a loader reads a file's
// samples with one seek. The folder holds group-NNNNNNNN.bin files (the
// samples' bytes back to back) and index.tsv: a first line
// "# gpemu grouped dataset: <k> samples per file", then one line per sample,
// "<file>\t<offset>\t<length>\t<label>\t<jpeg|bytes>", in group order.
// `order` "random" (seeded) packs a random mix of samples into each file (what
// GPEmu's accuracy runs found harmless); "sequential" keeps the dataset's order
// (an ImageFolder's is by class, which cost accuracy there).
struct GroupedDatasetSummary {
  std::size_t samples = 0;
  std::size_t files = 0;
  std::uint64_t total_bytes = 0;
};
// `out` must be missing or empty (InputError otherwise); on an error or an
// interruption everything it created is removed, and while it runs the folder
// holds kIncompleteDatasetMarker.
GroupedDatasetSummary write_grouped_dataset(const Dataset& dataset, const std::filesystem::path& out,
                                            std::size_t group_size, std::string_view order, std::uint64_t seed);
// Whether `dir` holds a grouped dataset's index.
bool is_grouped_dataset(const std::filesystem::path& dir);
// Opens one, checking every line (fields, a plain file name in the folder,
// the byte range inside the file, whole groups in order); InputError naming
// the file and line otherwise.
Dataset open_grouped_dataset(const std::filesystem::path& dir);
// What --data names: an FFCV-style file (open_ffcv_file), a grouped dataset, else an ImageFolder.
Dataset open_dataset_folder(const std::filesystem::path& dir);

// The dataset with its samples packed `group_size` to a file, in order
// (sample i into group i / group_size at the running offset), for datasets
// described by sizes (a virtual dataset, whose files become "virtual:<name>/
// group-<g>"): the layout `gpemu dataset group` writes, without writing it.
// InputError for a group size of 0.
Dataset grouped(const Dataset& dataset, std::size_t group_size);

// Datasets described by their sizes, without files: for the modelled loader
// (virtual clock) at an original experiment's scale, which no test machine
// has the disk for. `spec` is a preset or "sizes=FILE":
//  - "imagenet1k": ILSVRC-2012's training set, 1,281,167 JPEG files in 1,000
//    classes;
//  - "imagenette10g": GPEmu's Imagenette-10G, 87,473 JPEG files in 10
//    classes (Imagenette copied up to about 10 GB);
//  - "imagenette": Imagenette's training split (full size), 9,469 JPEG files
//    in 10 classes;
//  - "ffcv:<any of these>": that dataset's FFCV-style layout (ffcv_layout with
//    FfcvWriteOptions' defaults, write_imagenet.sh 500 0.50 90), which the
//    modelled loader reads as the FFCV-style loader;
//  - "sizes=FILE": one sample size in bytes per line (blank lines and lines
//    starting with '#' skipped), 1 byte to 1 TiB each, at most 20,000,000
//    samples and a file of at most 1 GiB; one class.
// The presets' file sizes follow ImageNet's file-size distribution (GPEmu's
// measurement, docs/pipeline.md "Datasets"): the dataset's i-th smallest file is that
// distribution's (i + 0.5)/n quantile, and a seeded permutation spreads the
// sizes over the samples. Samples are JPEG, labels round-robin over the
// classes, paths "virtual:<name>/<index>" that no file backs (the real
// loader cannot read them). InputError naming the spec, or the file and
// line, for anything else.
Dataset virtual_dataset(std::string_view spec, std::uint64_t seed = 0);
// The sizes of a "sizes=FILE" text, `name` naming it in errors.
std::vector<std::uint64_t> parse_sample_sizes(std::string_view text, const std::string& name);

// FFCV-style files (`gpemu dataset ffcv`; docs/pipeline.md "FFCV-style files"):
// a whole image dataset in one file, as FFCV's .beton holds it. Each image is
// scaled down so its longer side is at most max_resolution pixels (area
// averaging) and stored, by a seeded coin of probability jpeg_share, as a JPEG
// of jpeg_quality or as raw RGB pixels (FFCV's RGBImageField in 'proportion'
// mode: `write_imagenet.sh 500 0.50 90` is 500, 0.5, 90). Records are packed
// into pages of page_size bytes and never straddle a page unless larger than
// one (which then starts a page of its own, and the next record the page
// after it), so a page can be read or cached whole. Layout: a 4 KiB header
// (magic, version, figures), the pages, then the per-sample metadata table
// (offset, length, label, width, height, JPEG or raw) and an end magic.
struct FfcvWriteOptions {
  int max_resolution = 500;
  double jpeg_share = 0.5;
  int jpeg_quality = 90;
  std::uint64_t page_size = std::uint64_t{4} << 20;  // FFCV's DatasetWriter default
  std::uint64_t seed = 0;
};
struct FfcvSummary {
  std::size_t samples = 0, jpeg = 0, raw = 0;
  std::uint64_t file_bytes = 0, pages = 0;
};
// `out` must not exist (InputError otherwise); it appears whole or not at all.
FfcvSummary write_ffcv_file(const Dataset& images, const std::filesystem::path& out, const FfcvWriteOptions& options);
// Whether `path` is a file that starts with the format's magic.
bool is_ffcv_file(const std::filesystem::path& path);
// Its samples (format Jpeg or RawRgb, all in the one file) with page_size
// set; every table entry is checked (inside the data, raw lengths equal to
// width x height x 3, pages not straddled); InputError naming the file and
// entry otherwise.
Dataset open_ffcv_file(const std::filesystem::path& path);
// The same layout for a dataset described by sizes (a virtual dataset): each
// JPEG's pixels from its size at ImageNet's ~110 KB for 500x375 pixels, scaled
// to max_resolution, stored as JPEG (the size that quality gives) or raw by
// the same seeded coin, packed into pages as the writer packs them.
Dataset ffcv_layout(const Dataset& images, const FfcvWriteOptions& options);

// FFCV's QUASI_RANDOM order (ffcv.loader.OrderOption): the pages a rank
// reads are shuffled, then the samples of each window of consecutive pages
// holding at least `window` samples, so a batch touches few pages and a page
// is done with soon after it is first read (what a process cache needs).
// A pure function of (page of each sample, seed, epoch).
std::vector<std::size_t> quasi_random_order(const std::vector<std::size_t>& indices, const Dataset& dataset,
                                            std::size_t window, std::uint64_t seed, std::uint64_t epoch);

}  // namespace gpemu::pipeline

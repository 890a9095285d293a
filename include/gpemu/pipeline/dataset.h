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

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpemu::pipeline {

enum class SampleFormat {
  Jpeg,   // decoded and transformed into a float tensor by the loader
  Bytes,  // delivered as raw bytes; costs its read, no decode
};

struct Sample {
  std::string path;
  std::uint64_t offset = 0;  // first byte of the sample in the file
  std::uint64_t length = 0;  // bytes; for whole-file samples, the size when the dataset was opened
  std::int64_t label = -1;   // -1: no label
  SampleFormat format = SampleFormat::Bytes;
};

struct Dataset {
  std::string root;  // folder or list file it was opened from
  std::vector<Sample> samples;
  std::vector<std::string> classes;  // ImageFolder: class names, index = label
  std::size_t ignored_files = 0;     // files skipped because of their extension

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

enum class DlioFormat { Npy, Npz, Raw, Jpeg };
std::string_view to_string(DlioFormat f);
// Accepts "npy", "npz", "raw" (also "bin"), "jpeg" (also "jpg"); InputError otherwise.
DlioFormat parse_dlio_format(std::string_view name);

struct DlioOptions {
  DlioFormat format = DlioFormat::Npz;
  // Bytes per sample. Required for Raw; for Npy/Npz it is read from the array
  // header and, when non-zero here, must match it.
  std::uint64_t record_length = 0;
  // File name suffix to pick up; empty means .npy / .npz / .bin / .jpg+.jpeg.
  std::string extension;
  // Name of the sample array inside an .npz file (DLIO writes "x"); a file
  // without it is an InputError. An int array "y" of one value per sample,
  // when present, gives the labels.
  std::string npz_key = "x";
};

// Files are taken from `dir` only (not its subfolders), sorted by name.
Dataset open_dlio_dataset(const std::filesystem::path& dir, const DlioOptions& options);

Dataset open_file_list(const std::filesystem::path& list_file);

}  // namespace gpemu::pipeline

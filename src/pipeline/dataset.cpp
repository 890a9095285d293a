#include "gpemu/pipeline.h"

#include <sys/stat.h>

#include <cerrno>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "common/checked.h"
#include "common/fs_errors.h"
#include "common/message_text.h"
#include "gpemu/error.h"
#include "pipeline/npy.h"
#include "pipeline/tfrecord.h"

namespace gpemu::pipeline {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_jpeg_name(const fs::path& p) {
  const auto ext = lower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg";
}

void require_folder(const fs::path& dir, const std::string& what, const std::string& expected) {
  const fs::file_status st = status_or_throw(dir, what);
  if (!fs::exists(st)) {
    throw InputError(what + ": folder '" + dir.string() + "' does not exist; expected " + expected);
  }
  if (!fs::is_directory(st)) {
    throw InputError(what + ": '" + dir.string() + "' is not a folder; expected " + expected);
  }
}

std::uint64_t file_size_or_throw(const fs::path& p, const std::string& what) {
  std::error_code ec;
  // A FIFO or device named .jpg has no size ("Operation not supported"); say what it is.
  if (const auto st = status_or_throw(p, what); fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(what + ": '" + p.string() + "' is " +
                     (fs::is_directory(st) ? "a folder" : "a pipe, socket or device") +
                     ", not a regular file; expected image or record files");
  const auto size = fs::file_size(p, ec);
  if (ec) throw_fs_error(what, "stat", p, ec);
  return size;
}

std::vector<std::byte> read_prefix(const fs::path& p, std::size_t n) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError("cannot open '" + p.string() + "'");
  std::vector<std::byte> buf(n);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
  buf.resize(static_cast<std::size_t>(in.gcount()));
  return buf;
}

std::vector<std::byte> read_range(const fs::path& p, std::uint64_t offset, std::size_t n) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError("cannot open '" + p.string() + "'");
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> buf(n);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n) throw InputError("'" + p.string() + "' is truncated");
  return buf;
}

// The most samples one dataset may list: each costs about 100 bytes of
// memory, so 2^26 (67 million, past ImageNet-21k's 14 million) stays within
// a few GB, and a header claiming more is refused before allocating.
constexpr std::uint64_t kMaxSamples = std::uint64_t{1} << 26;

// Records of an npy array whose first axis is the sample axis.
struct RecordLayout {
  std::uint64_t count;
  std::uint64_t length;
};

// A folder's identity (device, inode), links followed.
using FolderId = std::pair<dev_t, ino_t>;
FolderId folder_id(const fs::path& p, const std::string& what) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) throw_fs_error(what, "read", p, std::error_code(errno, std::generic_category()));
  return {st.st_dev, st.st_ino};
}

RecordLayout npy_records(const NpyHeader& h, const std::string& what) {
  if (h.shape.empty()) throw InputError(what + ": a 0-d array holds no samples; expected shape (samples, ...)");
  if (h.fortran_order && h.shape.size() > 1) {
    throw InputError(what + ": Fortran-ordered array; samples must be contiguous (C order)");
  }
  std::uint64_t per = h.item_size;
  for (std::size_t i = 1; i < h.shape.size(); ++i) per = checked_mul(per, h.shape[i], what + ": the record length");
  if (per == 0)
    throw InputError(what + ": records of 0 bytes (an axis of length 0); expected records of at least 1 byte");
  return {h.shape[0], per};
}

void check_record_length(std::uint64_t expected, std::uint64_t found, const std::string& what) {
  if (expected != 0 && expected != found) {
    throw InputError(what + ": records are " + std::to_string(found) + " bytes, but record_length " +
                     std::to_string(expected) + " was given");
  }
}

}  // namespace

std::vector<std::string> Dataset::files() const {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& s : samples) {
    if (seen.insert(s.path).second) out.push_back(s.path);
  }
  return out;
}

std::uint64_t Dataset::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& s : samples) n += s.length;
  return n;
}

Dataset open_image_folder(const fs::path& root) {
  const std::string what = "ImageFolder dataset";
  const std::string expected = "a folder with one subfolder per class holding .jpg/.jpeg images";
  require_folder(root, what, expected);
  std::error_code marker_ec;
  if (fs::exists(root / kIncompleteDatasetMarker, marker_ec))
    throw InputError(what + ": '" + root.string() + "' is incomplete: the `gpemu dataset synth` that wrote it was " +
                     "stopped before it finished; delete the folder and generate it again");
  Dataset ds;
  ds.root = root.string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (is_folder(entry, what)) ds.classes.push_back(entry.path().filename().string());
  }
  if (ec) throw_fs_error(what, "list", root, ec);
  std::sort(ds.classes.begin(), ds.classes.end());
  if (ds.classes.empty())
    throw InputError(what + ": '" + root.string() + "' has no class subfolders; expected " + expected);

  for (std::size_t label = 0; label < ds.classes.size(); ++label) {
    const fs::path dir = root / ds.classes[label];
    std::vector<std::pair<std::string, std::string>> files;  // (folder, name): os.walk order
    // Links to folders are followed, as torchvision's ImageFolder (os.walk
    // with followlinks) does; one that leads back to a folder it sits in
    // would walk forever, so the folders entered are kept per level.
    std::vector<FolderId> chain{folder_id(dir, what)};
    auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
    if (ec) throw_fs_error(what, "list", dir, ec);
    for (auto end = fs::recursive_directory_iterator(); it != end; it.increment(ec)) {
      if (ec) throw_fs_error(what, "list a folder under", dir, ec);
      if (is_folder(*it, what)) {
        chain.resize(static_cast<std::size_t>(it.depth()) + 1);
        const FolderId id = folder_id(it->path(), what);
        if (std::find(chain.begin(), chain.end(), id) != chain.end()) {
          throw InputError(what + ": '" + shown_path(it->path()) + "' leads back to a folder it is in (a symbolic " +
                           "link loop); remove the link or point it at a folder outside '" + shown_path(dir) + "'");
        }
        chain.push_back(id);
        continue;
      }
      if (!is_jpeg_name(it->path())) {
        ++ds.ignored_files;
        continue;
      }
      files.emplace_back(it->path().parent_path().string(), it->path().filename().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& [folder, name] : files) {
      Sample s;
      s.path = (fs::path(folder) / name).string();
      s.length = file_size_or_throw(s.path, what);
      s.label = static_cast<std::int64_t>(label);
      s.format = SampleFormat::Jpeg;
      ds.samples.push_back(std::move(s));
    }
  }
  if (ds.samples.empty()) {
    throw InputError(what + ": no .jpg/.jpeg files in the " + std::to_string(ds.classes.size()) +
                     " class folders of '" + root.string() + "'");
  }
  return ds;
}

std::string_view to_string(DlioFormat f) {
  switch (f) {
    case DlioFormat::Npy: return "npy";
    case DlioFormat::Npz: return "npz";
    case DlioFormat::Raw: return "raw";
    case DlioFormat::Jpeg: return "jpeg";
    case DlioFormat::Tfrecord: return "tfrecord";
  }
  return "?";
}

DlioFormat parse_dlio_format(std::string_view name) {
  const auto n = lower(std::string(name));
  if (n == "npy") return DlioFormat::Npy;
  if (n == "npz") return DlioFormat::Npz;
  if (n == "raw" || n == "bin") return DlioFormat::Raw;
  if (n == "jpeg" || n == "jpg") return DlioFormat::Jpeg;
  if (n == "tfrecord") return DlioFormat::Tfrecord;
  throw InputError("unknown DLIO format '" + std::string(name) + "'; expected npy, npz, raw, jpeg or tfrecord");
}

Dataset open_dlio_dataset(const fs::path& dir, const DlioOptions& options) {
  const std::string what = "DLIO " + std::string(to_string(options.format)) + " dataset";
  require_folder(dir, what, "a folder of generated ." + std::string(to_string(options.format)) + " files");
  if (options.format == DlioFormat::Raw && options.record_length == 0) {
    throw InputError(what + ": record_length must be given (> 0) for raw records");
  }
  std::vector<std::string> exts;
  if (!options.extension.empty()) {
    exts.push_back(lower(options.extension));
  } else {
    switch (options.format) {
      case DlioFormat::Npy: exts = {".npy"}; break;
      case DlioFormat::Npz: exts = {".npz"}; break;
      case DlioFormat::Raw: exts = {".bin"}; break;
      case DlioFormat::Jpeg: exts = {".jpg", ".jpeg"}; break;
      case DlioFormat::Tfrecord: exts = {".tfrecord"}; break;
    }
  }
  Dataset ds;
  ds.root = dir.string();
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!is_file(entry, what)) continue;
    const auto ext = lower(entry.path().extension().string());
    if (std::find(exts.begin(), exts.end(), ext) != exts.end()) {
      files.push_back(entry.path());
    } else {
      ++ds.ignored_files;
    }
  }
  if (ec) throw_fs_error(what, "list", dir, ec);
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(what + ": no " + exts.front() + " files in '" + dir.string() + "'");

  for (const auto& file : files) {
    const std::string path = file.string();
    const std::string fwhat = what + ": " + path;
    const auto size = file_size_or_throw(file, what);
    auto add_records = [&](std::uint64_t base, const RecordLayout& r, const std::vector<std::int64_t>& labels) {
      // Checked before anything is allocated: a header's count times its
      // length can wrap 64 bits and pass a plain comparison.
      const std::uint64_t end = checked_add(base, checked_mul(r.count, r.length, fwhat + ": samples x record length"),
                                            fwhat + ": the end of the records");
      if (end > size)
        throw InputError(fwhat + ": file is shorter than its header says (" + std::to_string(r.count) + " records of " +
                         std::to_string(r.length) + " bytes need " + std::to_string(end) + " bytes, the file has " +
                         std::to_string(size) + ")");
      if (r.count > kMaxSamples - ds.samples.size())
        throw InputError(fwhat + ": the dataset would hold more than " + std::to_string(kMaxSamples) +
                         " samples; expected at most that many (fewer, larger records)");
      for (std::uint64_t i = 0; i < r.count; ++i) {
        Sample s;
        s.path = path;
        s.offset = base + i * r.length;
        s.length = r.length;
        s.label = i < labels.size() ? labels[i] : -1;
        s.format = SampleFormat::Bytes;
        ds.samples.push_back(std::move(s));
      }
    };
    switch (options.format) {
      case DlioFormat::Jpeg: {
        Sample s;
        s.path = path;
        s.length = size;
        s.format = SampleFormat::Jpeg;
        ds.samples.push_back(std::move(s));
        break;
      }
      case DlioFormat::Tfrecord: {
        const auto records = scan_tfrecords(file, size, kMaxSamples - ds.samples.size());
        for (const TfRecordExtent& r : records) {
          Sample s;
          s.path = path;
          s.offset = r.offset;
          s.length = r.bytes;
          s.format = SampleFormat::Bytes;
          ds.samples.push_back(std::move(s));
        }
        break;
      }
      case DlioFormat::Raw: {
        if (size % options.record_length != 0) {
          throw InputError(fwhat + ": size " + std::to_string(size) + " is not a multiple of record_length " +
                           std::to_string(options.record_length));
        }
        add_records(0, {size / options.record_length, options.record_length}, {});
        break;
      }
      case DlioFormat::Npy: {
        const auto h = parse_npy_header(read_prefix(file, 4096), fwhat);
        const auto r = npy_records(h, fwhat);
        check_record_length(options.record_length, r.length, fwhat);
        add_records(h.header_bytes, r, {});
        break;
      }
      case DlioFormat::Npz: {
        const auto entries = read_zip_entries(file);
        if (entries.empty()) throw InputError(fwhat + ": empty .npz");
        const ZipEntry* x = nullptr;
        const ZipEntry* y = nullptr;
        for (const auto& e : entries) {
          if (e.name == options.npz_key + ".npy") x = &e;
          if (e.name == "y.npy") y = &e;
        }
        if (x == nullptr) {
          // Taking another array (a label array "y") as the samples would
          // read the wrong bytes without a word.
          // Member names are the file's bytes: quoted printable, the list capped.
          std::string names;
          for (const auto& e : entries) names += (names.empty() ? "" : ", ") + printable_excerpt(e.name, 64);
          names = printable_excerpt(names, 512);
          throw InputError(fwhat + ": no array '" + options.npz_key + "' (the file holds " + names +
                           "); expected the samples in '" + options.npz_key + ".npy', as DLIO writes them");
        }
        if (x->method != 0) {
          throw InputError(
              fwhat + ": array '" + printable_excerpt(x->name, 64) +
              "' is compressed (np.savez_compressed); only stored arrays (np.savez) can be read as records");
        }
        const auto h =
            parse_npy_header(read_range(file, x->data_offset, std::min<std::uint64_t>(4096, x->size)), fwhat);
        const auto r = npy_records(h, fwhat);
        check_record_length(options.record_length, r.length, fwhat);
        std::vector<std::int64_t> labels;
        if (y != nullptr && y != x && y->method == 0) {
          const auto yh =
              parse_npy_header(read_range(file, y->data_offset, std::min<std::uint64_t>(4096, y->size)), fwhat);
          const bool int_type = yh.descr.size() >= 2 && (yh.descr[1] == 'i' || yh.descr[1] == 'u');
          if (int_type && yh.shape.size() == 1 && yh.shape[0] == r.count && yh.item_size <= 8 &&
              (yh.descr[0] == '<' || yh.descr[0] == '|') && r.count <= kMaxSamples &&
              yh.header_bytes + r.count * yh.item_size <= y->size) {
            const auto raw = read_range(file, y->data_offset + yh.header_bytes, r.count * yh.item_size);
            labels.resize(r.count);
            for (std::uint64_t i = 0; i < r.count; ++i) {
              std::uint64_t v = 0;
              for (std::size_t b = yh.item_size; b-- > 0;)
                v = (v << 8) | std::to_integer<std::uint64_t>(raw[i * yh.item_size + b]);
              if (yh.descr[1] == 'i' && yh.item_size < 8 && (v >> (8 * yh.item_size - 1)) & 1)
                v |= ~0ULL << (8 * yh.item_size);
              labels[i] = static_cast<std::int64_t>(v);
            }
          }
        }
        add_records(x->data_offset + h.header_bytes, r, labels);
        break;
      }
    }
  }
  return ds;
}

Dataset open_file_list(const fs::path& list_file) {
  const std::string what = "file list '" + list_file.string() + "'";
  std::ifstream in(list_file);
  if (!in) throw InputError(what + ": cannot open it");
  Dataset ds;
  ds.root = list_file.string();
  const fs::path base = list_file.parent_path();
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    std::string path_text = line;
    std::int64_t label = -1;
    const auto sep = line.find_last_of(" \t");
    if (sep != std::string::npos) {
      const std::string last = line.substr(sep + 1);
      char* end = nullptr;
      const long long v = std::strtoll(last.c_str(), &end, 10);
      if (!last.empty() && end == last.c_str() + last.size()) {
        label = v;
        path_text = line.substr(0, sep);
        while (!path_text.empty() && (path_text.back() == ' ' || path_text.back() == '\t')) path_text.pop_back();
      }
    }
    fs::path p(path_text);
    if (p.is_relative()) p = base / p;
    if (!is_file(p, what + " line " + std::to_string(line_no))) {
      throw InputError(what + " line " + std::to_string(line_no) + ": '" + p.string() + "' is not a readable file");
    }
    Sample s;
    s.path = p.string();
    s.length = file_size_or_throw(p, what);
    s.label = label;
    s.format = is_jpeg_name(p) ? SampleFormat::Jpeg : SampleFormat::Bytes;
    ds.samples.push_back(std::move(s));
  }
  if (ds.samples.empty()) throw InputError(what + ": lists no files");
  return ds;
}

}  // namespace gpemu::pipeline

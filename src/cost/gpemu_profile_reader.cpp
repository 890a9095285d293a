// Reading GPEmu's `profiled_data` tree (VLDB 2025 artifact):
//
//   time/compute/forward/<GPU>/<model>/time_by_batch_size.csv   Batch_Size,Time_In_SECONDS
//   time/compute/backward/<GPU>/<model>/time_by_batch_size.csv  (loss+zero_grad+backward+step)
//   time/transfer/<GPU>/<model>/data_transfer_time_by_batch_size.csv   pageable H2D of a batch
//   time/transfer/<GPU>/<model>/model_transfer_time.txt                one number, seconds
//   memory/<GPU>/<model>/memory.csv                             batch_size,peak,persistent (MiB)
#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "common/fs_errors.h"
#include "cost/text_fields.h"
#include "cost/units.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;
using namespace cost_detail;

namespace {

// A parsed table: the batch-size column and the named value columns, with the
// line each row came from (for duplicate messages).
struct Table {
  std::vector<int> batch_sizes;
  std::vector<std::vector<double>> columns;
  std::vector<int> lines;
};

// Reads a CSV with a header naming `batch_column` and `value_columns` (any
// order, any case, extra columns ignored); values must be finite and >= 0.
// `value_unit` describes the values for messages ("seconds", "MiB"). With
// `skipped`, a malformed row is left out and its message, ending "row
// skipped", appended there instead of thrown; a file without a usable header
// or any usable row still throws.
Table read_table(const fs::path& file, std::string_view batch_column, std::span<const std::string_view> value_columns,
                 std::string_view value_unit, double max_value, std::vector<std::string>* skipped = nullptr) {
  const std::string path = file.string();
  std::vector<std::string_view> expected{batch_column};
  expected.insert(expected.end(), value_columns.begin(), value_columns.end());
  const std::string expected_header = join(expected, ",");

  const std::string text = read_text_file(path);
  const std::vector<std::string_view> lines = split_lines(text);
  std::size_t first = 0;
  while (first < lines.size() && trim(lines[first]).empty()) ++first;
  if (first == lines.size())
    throw InputError(
        fmt::format("{}:1: empty file; expected the header '{}' and one row per batch size", path, expected_header));

  const int header_line = static_cast<int>(first) + 1;
  std::vector<std::string_view> header = split_csv(lines[first]);
  std::vector<std::size_t> index(expected.size());
  for (std::size_t c = 0; c < expected.size(); ++c) {
    std::string want = to_lower(expected[c]);
    auto it = std::find_if(header.begin(), header.end(), [&](std::string_view h) { return to_lower(h) == want; });
    if (it == header.end())
      throw InputError(fmt::format("{}:{}: header '{}' has no column '{}'; expected the header '{}'", path, header_line,
                                   quoted_excerpt(lines[first]), expected[c], expected_header));
    index[c] = static_cast<std::size_t>(it - header.begin());
  }

  Table table;
  table.columns.resize(value_columns.size());
  std::map<int, int> seen;  // batch size -> line
  // One row, checked whole before any of it is kept.
  auto read_row = [&](std::string_view row, int line) {
    std::vector<std::string_view> fields = split_csv(row);
    if (fields.size() != header.size())
      throw InputError(fmt::format("{}:{}: {} fields, but the header has {}; expected rows like '{}'", path, line,
                                   fields.size(), header.size(), expected_header));
    std::string_view batch_text = fields[index[0]];
    auto batch = parse_batch_size(batch_text);
    if (!batch)
      throw InputError(
          fmt::format("{}:{}: {} '{}' is not a batch size; expected a whole number >= 1 "
                      "(\"64\" or \"64.0\")",
                      path, line, batch_column, quoted_excerpt(batch_text)));
    if (auto it = seen.find(*batch); it != seen.end())
      throw InputError(
          fmt::format("{}:{}: batch size {} appears twice (first on line {}); expected "
                      "one row per batch size",
                      path, line, *batch, it->second));
    std::vector<double> values;
    for (std::size_t c = 0; c < value_columns.size(); ++c) {
      std::string_view value_text = fields[index[c + 1]];
      auto value = parse_number(value_text);
      if (!value || *value < 0 || *value > max_value)
        throw InputError(fmt::format("{}:{}: {} '{}' is invalid; expected a number from 0 to {:g} ({})", path, line,
                                     value_columns[c], quoted_excerpt(value_text), max_value, value_unit));
      values.push_back(*value);
    }
    seen.emplace(*batch, line);
    for (std::size_t c = 0; c < values.size(); ++c) table.columns[c].push_back(values[c]);
    table.batch_sizes.push_back(*batch);
    table.lines.push_back(line);
  };
  for (std::size_t i = first + 1; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    try {
      read_row(lines[i], static_cast<int>(i) + 1);
    } catch (const InputError& e) {
      if (!skipped) throw;
      skipped->push_back(fmt::format("{}; row skipped", e.what()));
    }
  }
  if (table.batch_sizes.empty())
    throw InputError(fmt::format("{}:{}: no {}rows after the header; expected one row per batch size", path,
                                 header_line + 1, skipped ? "valid " : ""));
  return table;
}

Series column_series(const Table& table, std::size_t column) {
  Series s;
  s.reserve(table.batch_sizes.size());
  for (std::size_t i = 0; i < table.batch_sizes.size(); ++i)
    s.push_back({table.batch_sizes[i], table.columns[column][i]});
  std::sort(s.begin(), s.end(),
            [](const ProfilePoint& a, const ProfilePoint& b) { return a.batch_size < b.batch_size; });
  return s;
}

Series read_time_series(const fs::path& file, std::vector<std::string>* skipped) {
  static constexpr std::string_view kValue[] = {"Time_In_SECONDS"};
  return column_series(read_table(file, "Batch_Size", kValue, "seconds", kMaxProfileSeconds, skipped), 0);
}

// A forward or backward table: times, not all 0 (a table of zeros is no
// measurement; a run would predict steps of no time from it as "measured").
Series read_compute_series(const fs::path& file, std::vector<std::string>* skipped) {
  static constexpr std::string_view kValue[] = {"Time_In_SECONDS"};
  const Table t = read_table(file, "Batch_Size", kValue, "seconds", kMaxProfileSeconds, skipped);
  if (std::all_of(t.columns[0].begin(), t.columns[0].end(), [](double v) { return v == 0; }))
    throw InputError(
        fmt::format("{}:{}: every Time_In_SECONDS is 0; expected measured times, above 0 at some batch "
                    "size",
                    file.string(), t.lines.front()));
  return column_series(t, 0);
}

double read_single_number(const fs::path& file) {
  const std::string path = file.string();
  const std::string text = read_text_file(path);
  const std::vector<std::string_view> lines = split_lines(text);
  std::optional<double> value;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const int line = static_cast<int>(i) + 1;
    if (value)
      throw InputError(
          fmt::format("{}:{}: a second value; expected the file to hold one number "
                      "(seconds)",
                      path, line));
    value = parse_number(lines[i]);
    if (!value || *value < 0 || *value > kMaxProfileSeconds)
      throw InputError(fmt::format("{}:{}: '{}' is invalid; expected one number from 0 to {:g} (seconds)", path, line,
                                   quoted_excerpt(lines[i]), kMaxProfileSeconds));
  }
  if (!value) throw InputError(fmt::format("{}:1: empty file; expected one number >= 0 (seconds)", path));
  return *value;
}

std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with('.')) continue;
    if (is_folder(entry, "profiles")) out.push_back(entry.path());
  }
  if (ec) throw_fs_error("profiles", "list", dir, ec);
  std::sort(out.begin(), out.end());
  return out;
}

const GpuSpec& resolve_gpu_folder(const fs::path& folder) {
  try {
    return find_gpu(folder.filename().string());
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: GPU folder does not name a catalogued GPU: {}", folder.string(), e.what()));
  }
}

// Collects profiles by (GPU id, model) while the tree is walked.
class Collector {
 public:
  // With `skipped`, a model folder whose table cannot be read (a missing or
  // malformed file) is reported there and left out instead of thrown.
  explicit Collector(std::vector<std::string>* skipped) : skipped_(skipped) {}

  // Calls fn(profile, model_folder) for every <GPU>/<model> folder under root.
  template <typename Fn>
  void each_model(const fs::path& root, Fn&& fn) {
    if (!is_folder(root, "profiles")) return;
    // Two folders naming one GPU ("Tesla_M40" and "M40") would silently
    // overwrite each other's tables.
    std::map<std::pair<std::string, std::string>, fs::path> seen;
    for (const fs::path& gpu_folder : subfolders(root)) {
      const GpuSpec& gpu = resolve_gpu_folder(gpu_folder);
      for (const fs::path& model_folder : subfolders(gpu_folder)) {
        std::string model = canonical_model_name(model_folder.filename().string());
        auto [it, fresh] = seen.try_emplace({gpu.id, model}, model_folder);
        if (!fresh)
          throw InputError(fmt::format("{} and {} both hold {}/{}; expected one folder per GPU and model",
                                       it->second.string(), model_folder.string(), gpu.id, model));
        try {
          fn(get(gpu.id, model), model_folder);
        } catch (const InputError& e) {
          if (!skipped_) throw;
          skipped_->push_back(fmt::format("{}; folder {} skipped", e.what(), model_folder.string()));
        }
      }
    }
  }

  // The profiles that hold something: a pair whose every folder was skipped
  // is left out.
  std::vector<Profile> take() {
    std::vector<Profile> out;
    for (auto& [key, p] : profiles_) {
      const bool empty = p.forward_s.empty() && p.backward_s.empty() && p.transfer_s.empty() && !p.model_transfer_s &&
                         p.peak_allocated_mib.empty() && !p.oom_batch_size;
      if (!empty) out.push_back(std::move(p));
    }
    return out;
  }

 private:
  Profile& get(const std::string& gpu, const std::string& model) {
    auto [it, fresh] = profiles_.try_emplace({gpu, model});
    if (fresh) {
      it->second.gpu = gpu;
      it->second.model = model;
    }
    return it->second;
  }
  std::map<std::pair<std::string, std::string>, Profile> profiles_;
  std::vector<std::string>* skipped_;
};

fs::path required_file(const fs::path& folder, std::string_view name) {
  fs::path file = folder / name;
  const fs::file_status st = status_or_throw(file, "profiles");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(fmt::format("{}: is {}, not a regular file; expected the {} table as a file", file.string(),
                                 fs::is_directory(st) ? "a folder" : "a device, pipe or socket", name));
  if (!fs::is_regular_file(st))
    throw InputError(
        fmt::format("{}: missing file; expected {} in every model folder of GPEmu's "
                    "profiled_data layout",
                    file.string(), name));
  return file;
}

// Removes a compute table's extrapolated tail; its first batch size is OOM evidence.
void split_tail(Series& series, std::optional<int>& oom) {
  std::size_t tail = extrapolated_tail_start(series);
  if (tail == series.size()) return;
  int first_oom = series[tail].batch_size;
  oom = oom ? std::min(*oom, first_oom) : first_oom;
  series.resize(tail);
}

void drop_from(Series& series, int batch_size) {
  std::erase_if(series, [&](const ProfilePoint& p) { return p.batch_size >= batch_size; });
}

}  // namespace

std::vector<Profile> read_gpemu_artifact(const fs::path& dir, std::vector<std::string>* skipped) {
  if (!is_folder(dir, "profiles"))
    throw InputError(fmt::format("{}: not a folder; expected GPEmu's profiled_data folder", dir.string()));
  Collector collector(skipped);

  collector.each_model(dir / "time" / "compute" / "forward", [&](Profile& p, const fs::path& folder) {
    p.forward_s = read_compute_series(required_file(folder, "time_by_batch_size.csv"), skipped);
    split_tail(p.forward_s, p.oom_batch_size);
  });
  collector.each_model(dir / "time" / "compute" / "backward", [&](Profile& p, const fs::path& folder) {
    p.backward_s = read_compute_series(required_file(folder, "time_by_batch_size.csv"), skipped);
    split_tail(p.backward_s, p.oom_batch_size);
  });
  collector.each_model(dir / "time" / "transfer", [&](Profile& p, const fs::path& folder) {
    fs::path data = folder / "data_transfer_time_by_batch_size.csv";
    fs::path model = folder / "model_transfer_time.txt";
    const bool has_data = exists_or_throw(data, "profiles"), has_model = exists_or_throw(model, "profiles");
    if (!has_data && !has_model)
      throw InputError(
          fmt::format("{}: transfer folder holds neither data_transfer_time_by_batch_size.csv "
                      "nor model_transfer_time.txt",
                      folder.string()));
    // GPEmu timed copies from pageable memory; transfers never ran out of
    // memory, so these tables carry no extrapolated tail.
    // Both read before either is kept: a folder is used whole or skipped whole.
    Series transfer = has_data ? read_time_series(data, skipped) : Series{};
    const std::optional<double> model_s = has_model ? std::optional(read_single_number(model)) : std::nullopt;
    if (has_data) p.transfer_s = std::move(transfer);
    if (model_s) p.model_transfer_s = *model_s;
    p.transfer_host_memory = HostMemoryKind::Pageable;
  });
  collector.each_model(dir / "memory", [&](Profile& p, const fs::path& folder) {
    static constexpr std::string_view kColumns[] = {"peak", "persistent"};
    const fs::path file = required_file(folder, "memory.csv");
    Table t = read_table(file, "batch_size", kColumns, "MiB", kMaxProfileMiB, skipped);
    // The peak includes what persists: a row whose peak is below it is no
    // measurement (S11), and the table is not used.
    for (std::size_t i = 0; i < t.batch_sizes.size(); ++i)
      if (t.columns[0][i] < t.columns[1][i])
        throw InputError(
            fmt::format("{}:{}: peak {:g} MiB is below persistent {:g} MiB at batch size {}; expected "
                        "peak >= persistent (the peak includes the memory that persists)",
                        file.string(), t.lines[i], t.columns[0][i], t.columns[1][i], t.batch_sizes[i]));
    p.peak_allocated_mib = column_series(t, 0);
    p.persistent_mib = column_series(t, 1);
  });

  std::vector<Profile> profiles = collector.take();
  for (Profile& p : profiles) {
    p.precision = Precision::FP32;
    p.input_bytes_per_sample = 3ull * 224 * 224 * 4;
    // memory_allocated() was read with the batch already on the GPU: its bytes
    // grow the "persistent" column by exactly one image per sample.
    const double input_mib = static_cast<double>(p.input_bytes_per_sample) / kBytesPerMiB;
    for (ProfilePoint& q : p.persistent_mib) q.value = std::max(0.0, q.value - q.batch_size * input_mib);
    if (p.oom_batch_size) {
      drop_from(p.peak_allocated_mib, *p.oom_batch_size);
      drop_from(p.persistent_mib, *p.oom_batch_size);
    }
    p.source = fmt::format("GPEmu profiled_data {} ({}/{})", dir.string(), p.gpu, p.model);
  }
  return profiles;
}

}  // namespace gpemu

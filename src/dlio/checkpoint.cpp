// DLIO checkpointing: the schedule (pure) and writing/reading checkpoint files
// on real storage with large sequential I/O.
#include "gpemu/dlio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/fs_errors.h"
#include "common/interrupt.h"
#include "common/random.h"
#include "dlio/free_space.h"
#include "gpemu/error.h"

namespace gpemu::dlio {

namespace fs = std::filesystem;

// --- Schedule ------------------------------------------------------------------

bool checkpoint_after_step(const DlioWorkload& w, int epoch, std::uint64_t step) {
  if (!w.workflow.checkpoint || !w.workflow.train || epoch < 1) return false;
  const std::int64_t every = w.checkpoint.steps_between_checkpoints;
  return every > 0 && step >= 1 && step % static_cast<std::uint64_t>(every) == 0;
}

bool checkpoint_after_epoch(const DlioWorkload& w, int epoch) {
  if (!w.workflow.checkpoint || !w.workflow.train || w.checkpoint.steps_between_checkpoints > 0) return false;
  const int first = w.checkpoint.checkpoint_after_epoch;
  const int every = std::max(1, w.checkpoint.epochs_between_checkpoints);
  return first >= 1 && epoch >= first && (epoch - first) % every == 0;
}

std::vector<CheckpointEvent> checkpoint_schedule(const DlioWorkload& w, std::optional<int> world_size) {
  std::vector<CheckpointEvent> events;
  if (!w.workflow.checkpoint) return events;
  if (!w.workflow.train) {
    for (int i = 1; i <= w.checkpoint.num_checkpoints_write; ++i) {
      events.push_back(CheckpointEvent{0, static_cast<std::uint64_t>(i), false});
    }
    return events;
  }
  const std::uint64_t steps = dlio_figures(w, world_size).steps_per_epoch_run;
  for (int e = 1; e <= w.train.epochs; ++e) {
    if (w.checkpoint.steps_between_checkpoints > 0) {
      for (std::uint64_t s = 1; s <= steps; ++s) {
        if (checkpoint_after_step(w, e, s)) events.push_back(CheckpointEvent{e, s, false});
      }
    } else if (checkpoint_after_epoch(w, e)) {
      events.push_back(CheckpointEvent{e, steps, true});
    }
  }
  return events;
}

bool rank_writes_checkpoint(const DlioWorkload& w, int rank) {
  return w.checkpoint.type == CheckpointType::AllRanks || rank == 0;
}

// --- Layout --------------------------------------------------------------------

std::vector<CheckpointFile> checkpoint_files(const DlioWorkload& w, int rank, int world_size, int epoch,
                                             std::uint64_t step) {
  std::vector<CheckpointFile> files;
  if (rank < 0 || !rank_writes_checkpoint(w, rank)) return files;
  (void)world_size;  // the layout depends on the rank's place in the tensor/pipeline grid only
  const fs::path dir = fmt::format("epoch{}-step{}", epoch, step);
  const auto& m = w.model;
  const auto sum = [](const std::vector<std::int64_t>& v) {
    return static_cast<std::uint64_t>(std::accumulate(v.begin(), v.end(), std::int64_t{0}));
  };
  if (!m.layer_parameters.empty()) {
    const int tp = std::max(1, m.parallelism.tensor);
    const int pp = std::max(1, m.parallelism.pipeline);
    const int layers = m.num_layers > 0 ? m.num_layers : 1;
    const int stage = (rank / tp) % pp;
    const int first = stage * layers / pp;
    const int last = (stage + 1) * layers / pp;
    const std::uint64_t elements =
        (sum(m.layer_parameters) + static_cast<std::uint64_t>(tp) - 1) / static_cast<std::uint64_t>(tp);
    const std::uint64_t bytes = elements * static_cast<std::uint64_t>(bytes_per_element(m.model_datatype));
    for (int l = first; l < last; ++l) {
      files.push_back(CheckpointFile{dir / fmt::format("rank{}-layer{}-model.bin", rank, l), bytes, "layer"});
    }
  } else {
    files.push_back(CheckpointFile{dir / fmt::format("rank{}-model.bin", rank),
                                   static_cast<std::uint64_t>(std::llround(m.model_size_bytes)), "model"});
  }
  if (!m.optimization_groups.empty()) {
    const std::uint64_t bytes =
        2 * sum(m.optimization_groups) * static_cast<std::uint64_t>(bytes_per_element(m.optimizer_datatype));
    files.push_back(CheckpointFile{dir / fmt::format("rank{}-optimizer.bin", rank), bytes, "optimizer"});
  }
  return files;
}

std::uint64_t checkpoint_bytes_per_rank(const DlioWorkload& w, int rank, int world_size) {
  std::uint64_t total = 0;
  for (const CheckpointFile& f : checkpoint_files(w, rank, world_size, 1, 0)) total += f.bytes;
  return total;
}

fs::path resolve_checkpoint_folder(const DlioWorkload& w, const fs::path& base_dir) {
  const fs::path folder = w.checkpoint.checkpoint_folder;
  if (folder.is_absolute()) return folder.lexically_normal();
  fs::path p = fs::path(w.storage.storage_root) / folder;
  if (!p.is_absolute()) p = (base_dir.empty() ? fs::current_path() : base_dir) / p;
  return p.lexically_normal();
}

// --- Contents --------------------------------------------------------------------

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPattern = 1u << 20;  // repeating random base, a multiple of kPage

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The bytes of a checkpoint file are a pure function of (seed, file, offset):
// a 1 MiB random base repeated, with every 4 KiB page stamped with the file's
// hash and the page number, so no two pages of a checkpoint are equal.
// randomize_tensor = false writes bytes of value 1 (DLIO's "tensor of ones").
class Content {
 public:
  Content(std::uint64_t seed, bool randomize) : randomize_(randomize) {
    if (!randomize_) return;
    base_.resize(kPattern);
    std::uint64_t state = seed;
    for (std::size_t i = 0; i < kPattern; i += 8) {
      const std::uint64_t v = common::next_splitmix64(state);
      std::memcpy(base_.data() + i, &v, 8);
    }
  }

  void fill(unsigned char* out, std::size_t n, std::uint64_t file_hash, std::uint64_t offset) const {
    if (!randomize_) {
      std::memset(out, 1, n);
      return;
    }
    std::size_t done = 0;
    while (done < n) {
      const std::size_t at = (offset + done) % kPattern;
      const std::size_t len = std::min(n - done, kPattern - at);
      std::memcpy(out + done, base_.data() + at, len);
      done += len;
    }
    std::uint64_t page_start = (offset + kPage - 1) / kPage * kPage;
    for (; page_start < offset + n; page_start += kPage) {
      const std::uint64_t stamp[2] = {file_hash, page_start / kPage};
      const std::size_t pos = page_start - offset;
      std::memcpy(out + pos, stamp, std::min<std::size_t>(sizeof stamp, n - pos));
    }
  }

 private:
  bool randomize_;
  std::vector<unsigned char> base_;
};

std::string os_error(int err) { return std::strerror(err); }

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct Prepared {
  fs::path folder;
  fs::path directory;
  std::vector<CheckpointFile> files;  // absolute
  std::size_t block = 0;
  int world_size = 1;
};

Prepared prepare(const DlioWorkload& w, const CheckpointIoOptions& o) {
  Prepared p;
  p.world_size = o.world_size > 0 ? o.world_size : w.gpemu.world_size;
  if (o.rank < 0 || o.rank >= p.world_size) {
    throw InputError(fmt::format("checkpoint: rank {} is not valid; accepted: 0 to {} (world size {})", o.rank,
                                 p.world_size - 1, p.world_size));
  }
  if (o.epoch < 0) {
    throw InputError(fmt::format("checkpoint: epoch {} is not valid; accepted: an integer >= 0", o.epoch));
  }
  p.block = std::max<std::size_t>(kPage, (o.block_bytes + kPage - 1) / kPage * kPage);
  p.folder = resolve_checkpoint_folder(w, o.base_dir);
  p.files = checkpoint_files(w, o.rank, p.world_size, o.epoch, o.step);
  p.directory = p.folder / fmt::format("epoch{}-step{}", o.epoch, o.step);
  for (CheckpointFile& f : p.files) f.path = p.folder / f.path;
  return p;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double gbs(std::uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0; }

void read_files(const DlioWorkload& w, const Prepared& p, bool verify, CheckpointResult& r) {
  const Content content(static_cast<std::uint64_t>(w.train.seed), w.checkpoint.randomize_tensor);
  std::vector<unsigned char> buf(p.block), expected(verify ? p.block : 0);
  bool all_match = verify;
  const auto t0 = std::chrono::steady_clock::now();
  for (const CheckpointFile& f : p.files) {
    Fd fd{::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0) {
      const int err = errno;
      throw InputError(
          fmt::format("checkpoint file '{}' cannot be opened for reading: {}", f.path.string(), os_error(err)));
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) != f.bytes) {
      throw InputError(fmt::format("checkpoint file '{}' holds {} bytes; expected {}", f.path.string(),
                                   static_cast<std::uint64_t>(st.st_size), f.bytes));
    }
    // Best effort: drop the file's clean pages so the read reaches storage.
    ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_DONTNEED);
    const std::uint64_t hash = fnv1a(f.path.filename().string());
    std::uint64_t offset = 0;
    while (offset < f.bytes) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(p.block, f.bytes - offset));
      std::size_t got = 0;
      while (got < want) {
        const ssize_t n = ::read(fd.fd, buf.data() + got, want - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const int err = errno;
          throw InputError(fmt::format("checkpoint file '{}' cannot be read at byte {}: {}", f.path.string(),
                                       offset + got, os_error(err)));
        }
        if (n == 0) {
          throw InputError(fmt::format("checkpoint file '{}' ends at byte {}; expected {} bytes", f.path.string(),
                                       offset + got, f.bytes));
        }
        got += static_cast<std::size_t>(n);
      }
      if (verify) {
        content.fill(expected.data(), want, hash, offset);
        if (std::memcmp(expected.data(), buf.data(), want) != 0) {
          std::size_t i = 0;
          while (i < want && expected[i] == buf[i]) ++i;
          throw InputError(fmt::format("checkpoint file '{}' differs from what was written at byte {}", f.path.string(),
                                       offset + i));
        }
      }
      offset += want;
    }
    r.bytes_read += f.bytes;
  }
  r.read_seconds = seconds_since(t0);
  r.read_gbs = gbs(r.bytes_read, r.read_seconds);
  r.verified = all_match;
}

}  // namespace

// --- Writing and reading -----------------------------------------------------------

CheckpointResult write_checkpoint(const DlioWorkload& w, const CheckpointIoOptions& options) {
  const Prepared p = prepare(w, options);
  CheckpointResult r;
  r.directory = p.directory;
  r.files = p.files;
  if (p.files.empty()) return r;

  std::error_code ec;
  std::uint64_t planned = 0;
  for (const CheckpointFile& f : p.files) planned = checked_add(planned, f.bytes, "checkpoint: the bytes to write");
  // Before the folder is made: a checkpoint that cannot fit leaves none (H4).
  detail::require_free_space(p.directory, planned, "checkpoint (model.model_size_bytes)");
  const bool created = !exists_or_throw(p.directory, "checkpoint.checkpoint_folder");
  fs::create_directories(p.directory, ec);
  if (ec || !is_folder(p.directory, "checkpoint.checkpoint_folder")) {
    throw InputError(
        fmt::format("checkpoint.checkpoint_folder: cannot create the directory '{}': {}; "
                    "accepted: a folder gpemu can create and write",
                    p.directory.string(), ec ? fs_reason(ec) : "a file of that name exists"));
  }
  const bool do_fsync = options.fsync.value_or(w.checkpoint.fsync);
  const Content content(static_cast<std::uint64_t>(w.train.seed), w.checkpoint.randomize_tensor);
  std::vector<unsigned char> buf(p.block);

  // A checkpoint is whole or absent: each file is written under a temporary
  // name and renamed when complete; on an error (a full disk) or an
  // interruption the files of this checkpoint written so far go too.
  std::vector<fs::path> done;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    for (const CheckpointFile& f : p.files) {
      AtomicFile out(f.path, "checkpoint file");
      const std::uint64_t hash = fnv1a(f.path.filename().string());
      std::uint64_t offset = 0;
      while (offset < f.bytes) {
        throw_if_interrupted();
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(p.block, f.bytes - offset));
        content.fill(buf.data(), want, hash, offset);
        out.write(buf.data(), want);
        offset += want;
      }
      out.commit(do_fsync);
      done.push_back(f.path);
      r.bytes_written += f.bytes;
    }
    r.write_seconds = seconds_since(t0);
  } catch (...) {
    for (const fs::path& f : done) fs::remove(f, ec);
    if (created) fs::remove(p.directory, ec);  // only when empty, and only when made here
    throw;
  }
  if (do_fsync) {
    // Make the new directory entries durable too.
    Fd dir{::open(p.directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (dir.fd >= 0) ::fsync(dir.fd);
  }
  r.write_gbs = gbs(r.bytes_written, r.write_seconds);

  if (options.read_back) read_files(w, p, options.verify, r);
  return r;
}

CheckpointResult read_checkpoint(const DlioWorkload& w, const CheckpointIoOptions& options) {
  const Prepared p = prepare(w, options);
  CheckpointResult r;
  r.directory = p.directory;
  r.files = p.files;
  if (p.files.empty()) return r;
  read_files(w, p, options.verify, r);
  return r;
}

}  // namespace gpemu::dlio

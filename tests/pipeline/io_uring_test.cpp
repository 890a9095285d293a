// io_uring reads: the same bytes as pread, failures reported per sample with
// their path, a loader epoch identical to one with pread, and a clear error
// (never a hang) where the kernel or a sandbox refuses io_uring. Tests that
// need io_uring skip, saying why, where it is unavailable (checked once).
#include "pipeline/io_uring_reader.h"

#include <gtest/gtest.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <iostream>

#include "gpemu/error.h"
#include "gpemu/pipeline.h"
#include "support/pipeline_test_util.h"

namespace gpemu::pipeline {
namespace {

using testing::TempDir;

#define SKIP_UNLESS_IO_URING()                                                       \
  do {                                                                               \
    if (!io_uring_support().available) GTEST_SKIP() << io_uring_support().message(); \
  } while (0)

// JPEG files (one sample each) and raw record files (several records a file,
// 1000 bytes each: not a multiple of the 4 KiB O_DIRECT alignment).
struct Datasets {
  TempDir dir;
  Dataset images, records;
  Datasets() {
    generate_image_dataset(dir / "images", 2, 10, 5, 6.0);
    images = open_image_folder(dir / "images");
    DlioGeneratorOptions g;
    g.format = DlioFormat::Raw;
    g.num_files = 3;
    g.samples_per_file = 5;
    g.record_length = 1000;
    g.seed = 9;
    generate_dlio_dataset(dir / "records", g);
    DlioOptions o;
    o.format = DlioFormat::Raw;
    o.record_length = 1000;
    records = open_dlio_dataset(dir / "records", o);
  }
};

const Datasets& datasets() {
  static const Datasets d;  // removed at exit (a forked child leaves with _exit and removes nothing)
  return d;
}

std::vector<ReadRequest> requests_for(const Dataset& ds) {
  std::vector<ReadRequest> r;
  for (const Sample& s : ds.samples) r.push_back({s.path, s.offset, s.length});
  return r;
}

TEST(ReadMethod, ParsesItsNamesAndRejectsOthers) {
  EXPECT_EQ(parse_read_method("pread"), ReadMethod::Pread);
  EXPECT_EQ(parse_read_method("io_uring"), ReadMethod::IoUring);
  EXPECT_EQ(to_string(ReadMethod::IoUring), "io_uring");
  EXPECT_EQ(LoaderOptions{}.read_method, ReadMethod::Pread);
  try {
    parse_read_method("aio");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'aio'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("io_uring"), std::string::npos) << e.what();
  }
}

TEST(IoUring, UnavailableIsAnInputErrorSayingWhatIsMissing) {
  if (io_uring_support().available)
    GTEST_SKIP() << "io_uring is available here; this checks the message where it is not";
  const std::string reason = io_uring_support().reason;
  EXPECT_FALSE(reason.empty());
  LoaderOptions o;
  o.read_method = ReadMethod::IoUring;
  try {
    DataLoader loader(datasets().records, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pread"), std::string::npos) << e.what();
  }
  EXPECT_THROW(IoUringReader(8), InputError);
}

TEST(IoUring, ReadsTheSameBytesAsPreadForWholeFilesAndRecords) {
  SKIP_UNLESS_IO_URING();
  for (const Dataset* ds : {&datasets().images, &datasets().records}) {
    const auto requests = requests_for(*ds);
    for (const bool direct : {false, true}) {
      // A ring smaller than the batch (reads go in waves) and one that holds it all.
      for (const unsigned depth : {4u, 64u}) {
        SCOPED_TRACE(ds->root + (direct ? " O_DIRECT" : "") + " depth " + std::to_string(depth));
        FileReader pread_reader(direct);
        IoUringReader uring(depth, direct);
        EXPECT_EQ(uring.queue_depth(), depth);
        const auto results = uring.read_batch(requests);
        ASSERT_EQ(results.size(), requests.size());
        for (std::size_t i = 0; i < requests.size(); ++i) {
          ASSERT_TRUE(results[i].ok()) << results[i].error;
          const auto want = pread_reader.read(requests[i].path, requests[i].offset, requests[i].length);
          ASSERT_EQ(results[i].bytes.size(), requests[i].length);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), results[i].bytes.begin(), results[i].bytes.end()))
              << "sample " << i << " " << requests[i].path;
        }
        EXPECT_EQ(uring.direct(), pread_reader.direct());  // both bypass the page cache, or both were refused
      }
    }
  }
  // The records are the generator's bytes, not only pread's, also when read
  // straight into the caller's memory.
  const auto& ds = datasets().records;
  std::vector<std::byte> batch(ds.size() * 1000);
  auto requests = requests_for(ds);
  for (std::size_t i = 0; i < ds.size(); ++i) requests[i].destination = batch.data() + i * 1000;
  for (const bool into_batch : {false, true}) {
    IoUringReader uring(16);
    const auto results = uring.read_batch(into_batch ? requests : requests_for(ds));
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const auto want = dlio_record_bytes(9, i / 5, i % 5, 1000);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), results[i].bytes.begin(), results[i].bytes.end())) << i;
      if (into_batch) {
        EXPECT_EQ(results[i].bytes.data(), batch.data() + i * 1000);
      }
    }
  }
}

TEST(IoUring, ReportsEachFailedSampleWithItsPathAndReadsTheOthers) {
  SKIP_UNLESS_IO_URING();
  TempDir dir;
  const std::string good = dir.write("good.bin", std::string(5000, 'g')).string();
  const std::string missing = (dir / "missing.bin").string();
  std::filesystem::create_directories(dir / "folder.bin");
  const std::string folder = (dir / "folder.bin").string();
  const std::string shorter = dir.write("short.bin", std::string(100, 's')).string();
  const std::vector<ReadRequest> requests = {{good, 0, 5000},    {missing, 0, 10},   {folder, 0, 10},
                                             {shorter, 50, 100}, {good, 4000, 1000}, {good, 10, 0}};
  for (const bool direct : {false, true}) {
    IoUringReader uring(8, direct);
    const auto r = uring.read_batch(requests);
    ASSERT_EQ(r.size(), requests.size());
    ASSERT_TRUE(r[0].ok()) << r[0].error;
    EXPECT_TRUE(std::all_of(r[0].bytes.begin(), r[0].bytes.end(), [](std::byte b) { return b == std::byte{'g'}; }));
    EXPECT_EQ(r[0].bytes.size(), 5000u);
    ASSERT_FALSE(r[1].ok());
    EXPECT_EQ(r[1].error, "cannot open '" + missing + "': No such file or directory");
    ASSERT_FALSE(r[2].ok());
    EXPECT_NE(r[2].error.find(folder), std::string::npos) << r[2].error;
    EXPECT_NE(r[2].error.find("Is a directory"), std::string::npos) << r[2].error;
    ASSERT_FALSE(r[3].ok());
    EXPECT_NE(r[3].error.find(shorter), std::string::npos) << r[3].error;
    EXPECT_NE(r[3].error.find("the file ends after 50"), std::string::npos) << r[3].error;
    ASSERT_TRUE(r[4].ok()) << r[4].error;
    EXPECT_EQ(r[4].bytes.size(), 1000u);
    ASSERT_TRUE(r[5].ok()) << r[5].error;
    EXPECT_TRUE(r[5].bytes.empty());
  }
  // The same messages as pread's.
  FileReader pread_reader;
  try {
    pread_reader.read(missing, 0, 10);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot open '" + missing + "': No such file or directory");
  }
  EXPECT_TRUE(IoUringReader(1).read_batch({}).empty());
}

struct Delivered {
  std::vector<std::size_t> indices;
  std::vector<std::int64_t> labels;
  std::vector<std::vector<std::byte>> data;  // per batch
  std::vector<std::vector<std::string>> skipped;
  std::uint64_t bytes_read = 0, cache_hits = 0;
};

Delivered run_epochs(const Dataset& ds, LoaderOptions o, int epochs) {
  Delivered d;
  DataLoader loader(ds, o);
  for (int e = 0; e < epochs; ++e) {
    loader.begin_epoch(static_cast<std::uint64_t>(e));
    while (auto b = loader.next()) {
      d.indices.insert(d.indices.end(), b->sample_indices.begin(), b->sample_indices.end());
      d.labels.insert(d.labels.end(), b->labels.begin(), b->labels.end());
      d.data.emplace_back(b->bytes().begin(), b->bytes().end());
      std::vector<std::string> paths;
      for (const auto& s : b->skipped) paths.push_back(s.path);
      d.skipped.push_back(paths);
      d.bytes_read += b->bytes_read;
      d.cache_hits += b->cache_hits;
    }
  }
  return d;
}

TEST(IoUring, LoaderEpochsDeliverTheSameBatchesAsPread) {
  SKIP_UNLESS_IO_URING();
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 21;
  o.transform.height = 24;
  o.transform.width = 32;
  for (const int workers : {0, 2}) {
    for (const bool records : {false, true}) {
      SCOPED_TRACE(std::to_string(workers) + " workers, " + (records ? "records" : "images"));
      const Dataset& ds = records ? datasets().records : datasets().images;
      o.num_workers = workers;
      // A loader cache that holds part of the dataset: the second epoch mixes
      // hits and reads in a batch.
      o.cache_bytes = records ? 6000 : 0;
      o.read_method = ReadMethod::Pread;
      const Delivered want = run_epochs(ds, o, 2);
      o.read_method = ReadMethod::IoUring;
      const Delivered got = run_epochs(ds, o, 2);
      EXPECT_EQ(got.indices, want.indices);
      EXPECT_EQ(got.labels, want.labels);
      EXPECT_TRUE(got.data == want.data);  // the same tensors, bit for bit
      EXPECT_EQ(got.bytes_read, want.bytes_read);
      EXPECT_EQ(got.cache_hits, want.cache_hits);
      if (records) {
        EXPECT_GT(got.cache_hits, 0u);
      }
    }
  }
}

TEST(IoUring, SuperbatchesDeliverTheSameBatchesAsPread) {
  SKIP_UNLESS_IO_URING();
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = true;
  o.seed = 5;
  o.transform.height = 24;
  o.transform.width = 32;
  o.num_workers = 2;
  for (const bool records : {false, true}) {
    SCOPED_TRACE(records ? "records" : "images");
    const Dataset& ds = records ? datasets().records : datasets().images;
    o.cache_bytes = records ? 6000 : 0;
    o.read_method = ReadMethod::Pread;
    o.superbatch = 1;
    const Delivered want = run_epochs(ds, o, 2);
    o.read_method = ReadMethod::IoUring;
    o.superbatch = 3;  // each worker reads three of its batches at once, keeping two
    const Delivered got = run_epochs(ds, o, 2);
    EXPECT_EQ(got.indices, want.indices);
    EXPECT_EQ(got.labels, want.labels);
    EXPECT_TRUE(got.data == want.data);
    EXPECT_EQ(got.bytes_read, want.bytes_read);
    EXPECT_EQ(got.cache_hits, want.cache_hits);
  }
  // A superbatch is io_uring reads: with pread it is refused, saying so.
  o.read_method = ReadMethod::Pread;
  try {
    DataLoader l(datasets().images, o);
    FAIL() << "a superbatch over pread was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("io_uring"), std::string::npos) << e.what();
  }
}

TEST(IoUring, LoaderSkipAndStopStillApplyPerSample) {
  SKIP_UNLESS_IO_URING();
  TempDir dir;
  generate_image_dataset(dir.path(), 1, 6, 4, 4.0);
  const Dataset ds = open_image_folder(dir.path());
  std::filesystem::remove(ds.samples[2].path);
  LoaderOptions o;
  o.batch_size = 6;
  o.num_workers = 1;
  o.transform.height = o.transform.width = 16;
  o.read_method = ReadMethod::IoUring;
  o.on_error = OnError::Skip;
  const Delivered skip = run_epochs(ds, o, 1);
  ASSERT_EQ(skip.skipped.size(), 1u);
  EXPECT_EQ(skip.skipped[0], std::vector<std::string>{ds.samples[2].path});
  EXPECT_EQ(skip.indices, (std::vector<std::size_t>{0, 1, 3, 4, 5}));
  o.on_error = OnError::Stop;
  DataLoader stop(ds, o);
  try {
    stop.next();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(ds.samples[2].path), std::string::npos) << e.what();
  }
}

TEST(IoUring, LoaderSkipLeavesTheSameByteRecordsAsPread) {
  SKIP_UNLESS_IO_URING();
  // io_uring reads records straight into the batch; a skipped one in the
  // middle must leave the batch packed exactly as pread's.
  TempDir dir;
  DlioGeneratorOptions g;
  g.format = DlioFormat::Raw;
  g.num_files = 3;
  g.samples_per_file = 4;
  g.record_length = 700;
  generate_dlio_dataset(dir.path(), g);
  DlioOptions d;
  d.format = DlioFormat::Raw;
  d.record_length = 700;
  const Dataset ds = open_dlio_dataset(dir.path(), d);
  std::filesystem::resize_file(ds.samples[4].path, 700 * 2 + 300);  // file 1 keeps records 4 and 5
  LoaderOptions o;
  o.batch_size = 5;
  o.num_workers = 1;
  o.on_error = OnError::Skip;
  const Delivered want = run_epochs(ds, o, 1);
  o.read_method = ReadMethod::IoUring;
  const Delivered got = run_epochs(ds, o, 1);
  EXPECT_EQ(want.indices, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 8, 9, 10, 11}));
  EXPECT_EQ(got.indices, want.indices);
  EXPECT_EQ(got.skipped, want.skipped);
  EXPECT_TRUE(got.data == want.data);
}

// Where the kernel or a container's seccomp profile refuses io_uring_setup
// (EPERM), the probe says so and the loader fails with an InputError, with
// workers or without, rather than hanging or crashing. The refusal is made
// real with a seccomp filter in a forked child.
#if defined(__x86_64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t kAuditArch = 0;
#endif

bool refuse_io_uring_setup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// In the child: 0 when everything behaved, 77 when seccomp is unavailable,
// another code (with a line on stderr) for the first check that failed.
int child_with_io_uring_refused(const Dataset& ds) {
  if (!refuse_io_uring_setup()) return 77;
  const IoUringSupport probe = probe_io_uring();
  if (probe.available || probe.reason.find("not permitted") == std::string::npos) {
    std::cerr << "probe: " << (probe.available ? "available" : probe.reason) << "\n";
    return 2;
  }
  try {
    IoUringReader reader(8);
    std::cerr << "IoUringReader constructed\n";
    return 3;
  } catch (const InputError& e) {
    if (std::string(e.what()).find("pread") == std::string::npos) {
      std::cerr << "reader: " << e.what() << "\n";
      return 4;
    }
  }
  for (const int workers : {0, 2}) {
    LoaderOptions o;
    o.batch_size = 4;
    o.num_workers = workers;
    o.read_method = ReadMethod::IoUring;
    try {
      // The process probed io_uring before the filter, so construction may
      // pass and the workers' rings be refused instead: either is an error.
      DataLoader loader(ds, o);
      while (loader.next()) {
      }
      std::cerr << "an epoch with " << workers << " workers completed\n";
      return 5;
    } catch (const InputError& e) {
      if (std::string(e.what()).find("io_uring") == std::string::npos) {
        std::cerr << "loader: " << e.what() << "\n";
        return 6;
      }
    }
  }
  return 0;
}

TEST(IoUring, RefusedByTheKernelIsAClearInputErrorNotAHang) {
  SKIP_UNLESS_IO_URING();  // also caches "available" in this process, as a long-running one would have
  if (kAuditArch == 0) GTEST_SKIP() << "no seccomp architecture constant for this CPU";
  const Dataset& ds = datasets().records;
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    ::alarm(60);  // a hang ends the child with SIGALRM, which fails the test
    ::_exit(child_with_io_uring_refused(ds));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's line on stderr";
}

}  // namespace
}  // namespace gpemu::pipeline

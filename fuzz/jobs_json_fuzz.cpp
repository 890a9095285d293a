// libFuzzer harness: the jobs file of `gpemu share` (parse_jobs): JSON, every
// key checked, datasets described by their sizes, queues.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "gpemu/share.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpemu::fuzz::expect_input_errors_only([&] {
    const gpemu::JobsFile f = gpemu::parse_jobs(text, "jobs file (fuzz)");
    // What parsed names jobs that exist and, for a queue, an earlier one.
    for (std::size_t i = 0; i < f.jobs.size(); ++i)
      if (!f.jobs[i].after.empty() && f.jobs[i].after == f.jobs[i].name) std::abort();
  });
  return 0;
}

// libFuzzer harness: storage device files (`gpemu train --storage FILE.json`,
// parse_storage), read from the harness's scratch folder.
#include <cstddef>
#include <cstdint>
#include <fstream>

#include "fuzz_util.h"
#include "gpemu/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = (gpemu::fuzz::scratch_dir() / "storage.json").string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  gpemu::fuzz::expect_input_errors_only([&] {
    const gpemu::pipeline::StorageDevice d = gpemu::pipeline::parse_storage(path);
    // A device that parsed serves requests without leaving the clock's range.
    gpemu::pipeline::StorageServer server(gpemu::pipeline::shared_by(d, 3));
    server.serve(0, 1 << 20);
  });
  return 0;
}

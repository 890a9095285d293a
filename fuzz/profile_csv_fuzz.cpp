// libFuzzer harness: GPEmu's profiled_data CSV tables, read through
// read_gpemu_artifact. The input becomes the forward-time table of one
// (GPU, model); the other tables are fixed and valid, so each run reaches
// the table parser and what the reader does with the values.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "fuzz_util.h"
#include "gpemu/cost_model.h"

namespace {

const std::filesystem::path& tree() {
  static const std::filesystem::path root = [] {
    const auto r = gpemu::fuzz::scratch_dir() / "profiled_data";
    auto put = [&](const std::filesystem::path& rel, std::string_view text) {
      gpemu::fuzz::write_file(r / rel, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    };
    put("time/compute/backward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv",
        "Batch_Size,Time_In_SECONDS\n1,0.02\n2,0.03\n4,0.05\n");
    put("time/transfer/Tesla_V100-PCIE-32GB/resnet50/data_transfer_time_by_batch_size.csv",
        "Batch_Size,Time_In_SECONDS\n1,0.0001\n2,0.0002\n");
    put("memory/Tesla_V100-PCIE-32GB/resnet50/memory.csv", "batch_size,peak,persistent\n1,500,200\n2,600,210\n");
    return r;
  }();
  return root;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpemu::fuzz::write_file(tree() / "time/compute/forward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv", data,
                          size);
  gpemu::fuzz::expect_input_errors_only([&] { gpemu::read_gpemu_artifact(tree()); });
  return 0;
}

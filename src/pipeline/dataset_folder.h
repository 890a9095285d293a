// Writing a dataset into a folder a user named: the folder must be missing or
// empty, holds kIncompleteDatasetMarker while it is written (readers refuse
// it), and on an error or an interruption everything the write created is
// removed, nothing else.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>

namespace gpemu::pipeline {

// Runs `write` on `dir` under those rules; `what` names the folder in errors
// ("dataset synth --out").
void write_new_dataset_folder(const std::filesystem::path& dir, const std::string& what,
                              const std::function<void()>& write);

// A file that appears whole (written to a temporary, then renamed); a failed
// write carries the OS reason.
void write_dataset_file(const std::filesystem::path& path, std::span<const std::byte> head,
                        std::span<const std::byte> body = {});

}  // namespace gpemu::pipeline

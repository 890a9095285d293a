// Where gpemu's data (zoo/, data/calibration.json, configs/) is found, as a
// pure function of the places to look, so the order can be tested without
// installing anything. zoo::data_dir() fills the places in from the process.
#pragma once

#include <filesystem>
#include <string>

namespace gpemu::zoo {

struct DataDirCandidates {
  std::string env;                        // $GPEMU_DATA_DIR ("" when unset)
  std::filesystem::path executable;       // the running program ("" when unknown)
  std::filesystem::path from_executable;  // the data folder relative to the program's folder
  std::filesystem::path installed;        // the configured install prefix's share/gpemu
  std::filesystem::path source;           // the source tree the library was built from
  // The shared object holding gpemu's code when that is not the program (the
  // Python module), and the data folder relative to its folder.
  std::filesystem::path module;
  std::filesystem::path from_module;
};

// The first of: env when non-empty; the folder next to the executable (an
// installed gpemu, or a program installed beside it); the folder next to the
// module (an installed Python module); the configured install folder; the
// source tree. A candidate folder counts only when it holds zoo/;
// the source tree is the answer when nothing else is.
std::filesystem::path resolve_data_dir(const DataDirCandidates& c);

}  // namespace gpemu::zoo

// Checks an output path before a run starts, so that a run of minutes or hours
// does not end in "cannot write" with its results lost.
#pragma once

#include <filesystem>
#include <string>

namespace gpemu {

// Throws InputError naming `what` (e.g. "--trace") and the path when the file
// could not be created: its folder is missing, is not a folder or is not
// writable (with the OS reason), or the path is an existing folder. Creates
// nothing. Non-regular existing targets such as /dev/null are accepted. A
// symlink is checked where it points; one another user planted in a shared
// folder is refused (follow_output_link).
void check_output_path(const std::filesystem::path& path, const std::string& what);

}  // namespace gpemu

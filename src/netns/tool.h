// Runs a system program (ip, tc) with an argument vector, never a shell
// string, and captures what it says: `gpemu netns` builds and removes network
// namespaces through iproute2's own commands, so what it does is what an
// administrator would type, and a failure quotes the program's own reason.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpemu::netns {

struct ToolResult {
  int status = -1;  // exit status; 127 when the program could not be started; -1 when killed by a signal
  std::string out, err;
};

// posix_spawnp(argv[0], argv) with standard input from /dev/null and
// standard output and error captured; waits for it.
ToolResult run_tool(const std::vector<std::string>& argv);

// Whether `name` is an executable file in a folder of $PATH.
bool on_path(std::string_view name);

// "ip link add ..." for messages: the words joined by spaces.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace gpemu::netns

// Entry point of the `gpemu` command: parses the command line, dispatches to
// a subcommand, prints errors as one line and returns the exit status.
#pragma once

namespace gpemu::cli {
int run(int argc, char** argv);
}

// The `gpemu` command. All logic lives in the cli layer (src/cli).
#include "cli/cli.h"

int main(int argc, char** argv) { return gpemu::cli::run(argc, argv); }

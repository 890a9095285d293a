// What this process may still allocate, for refusing up front a run whose
// records would not fit (instead of dying of std::bad_alloc hours in).
#pragma once

namespace gpemu {

// The smaller of the memory the machine has available (MemAvailable) and
// what the process's address-space limit (ulimit -v) leaves, in bytes; 0 when
// neither can be read (then nothing should be refused).
double allocatable_bytes();

}  // namespace gpemu

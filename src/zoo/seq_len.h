// The check every front end makes of --seq-len against the model it names.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpemu::zoo {

// InputError when a sequence length (> 0) is given for a model of the zoo
// that has no sequence dimension (a CNN): the run would ignore it.
void check_seq_len_applies(std::string_view name, std::int64_t seq_len);

}  // namespace gpemu::zoo

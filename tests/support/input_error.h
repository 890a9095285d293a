// The message of the InputError a call throws, for tests that check what a
// user is told.
#pragma once

#include <string>

#include "gpemu/error.h"

namespace gpemu::testing {

// What `f()` throws as an InputError; "" when it throws none.
template <class F>
std::string input_error_message(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace gpemu::testing

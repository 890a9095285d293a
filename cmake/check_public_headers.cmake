# ctest's headers.public_api: the installed headers (include/gpemu) are the
# API, not the implementation (issue 29). Fails, naming the header and the
# line, when one of them names nlohmann (JSON types and JSON writers stay in
# the layers' internal headers, src/<layer>/*_json.h).
if(NOT DEFINED GPEMU_INCLUDE_DIR)
  message(FATAL_ERROR "check_public_headers.cmake: -DGPEMU_INCLUDE_DIR=... is required")
endif()
file(GLOB headers ${GPEMU_INCLUDE_DIR}/gpemu/*.h)
if(NOT headers)
  message(FATAL_ERROR "check_public_headers.cmake: no headers in ${GPEMU_INCLUDE_DIR}/gpemu")
endif()
set(problems "")
foreach(h IN LISTS headers)
  file(STRINGS ${h} lines REGEX "nlohmann")
  foreach(l IN LISTS lines)
    get_filename_component(name ${h} NAME)
    string(APPEND problems "  include/gpemu/${name}: ${l}\n")
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "public headers name nlohmann (move the JSON part to an internal header in src/<layer>/):\n${problems}")
endif()
list(LENGTH headers n)
message(STATUS "${n} public headers, none names nlohmann")

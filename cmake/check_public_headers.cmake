# ctest's headers.public_api: the installed headers (include/gpemu) are the
# API, not the implementation (issue 29). Fails, naming the header and the
# line, when one of them names nlohmann (JSON types and JSON writers stay in
# the layers' internal headers, src/<layer>/*_json.h), and when one is longer
# than 600 lines (one concept per header: a layer's concepts are the headers
# of its folder, gpemu/<layer>/*.h, and gpemu/<layer>.h includes them all).
if(NOT DEFINED GPEMU_INCLUDE_DIR)
  message(FATAL_ERROR "check_public_headers.cmake: -DGPEMU_INCLUDE_DIR=... is required")
endif()
get_filename_component(GPEMU_INCLUDE_DIR ${GPEMU_INCLUDE_DIR} ABSOLUTE)
file(GLOB_RECURSE headers ${GPEMU_INCLUDE_DIR}/gpemu/*.h)
if(NOT headers)
  message(FATAL_ERROR "check_public_headers.cmake: no headers in ${GPEMU_INCLUDE_DIR}/gpemu")
endif()
set(problems "")
set(max_lines 600)
foreach(h IN LISTS headers)
  file(RELATIVE_PATH name ${GPEMU_INCLUDE_DIR} ${h})
  file(STRINGS ${h} lines REGEX "nlohmann")
  foreach(l IN LISTS lines)
    string(APPEND problems "  include/${name}: ${l}\n")
  endforeach()
  # Lines as wc -l counts them (file(STRINGS) would drop empty ones).
  file(READ ${h} text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines n)
  if(n GREATER max_lines)
    string(APPEND problems "  include/${name}: ${n} lines, more than ${max_lines}: split it by concept\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "public headers that are not the API (JSON types go to an internal header in src/<layer>/):\n${problems}")
endif()
list(LENGTH headers count)
message(STATUS "${count} public headers, none names nlohmann or is longer than ${max_lines} lines")

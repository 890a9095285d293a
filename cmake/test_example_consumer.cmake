# ctest's install.example_consumer: installs this build into a fresh prefix
# inside the build tree, builds examples/train_virtual against it with
# find_package(gpemu), installs the example beside gpemu and runs it. Passes
# when the example exits 0 and read its data from the installed share/gpemu.
foreach(v GPEMU_BUILD_DIR GPEMU_EXAMPLE_DIR GPEMU_WORK_DIR GPEMU_GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "test_example_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()

set(prefix ${GPEMU_WORK_DIR}/prefix)
set(example_build ${GPEMU_WORK_DIR}/example-build)
file(REMOVE_RECURSE ${GPEMU_WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("installing gpemu" ${CMAKE_COMMAND} --install ${GPEMU_BUILD_DIR} --prefix ${prefix})
set(configure ${CMAKE_COMMAND} -S ${GPEMU_EXAMPLE_DIR} -B ${example_build} -G ${GPEMU_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_INSTALL_PREFIX=${prefix})
if(GPEMU_BUILD_TYPE)
  list(APPEND configure -DCMAKE_BUILD_TYPE=${GPEMU_BUILD_TYPE})
endif()
if(GPEMU_CXX_COMPILER)
  list(APPEND configure -DCMAKE_CXX_COMPILER=${GPEMU_CXX_COMPILER})
endif()
run("configuring the example" ${configure})
run("building the example" ${CMAKE_COMMAND} --build ${example_build})
run("installing the example" ${CMAKE_COMMAND} --install ${example_build})
run("running the example" ${CMAKE_COMMAND} -E env --unset=GPEMU_DATA_DIR ${prefix}/bin/train_virtual)
message(STATUS "${last_output}")

file(REAL_PATH ${prefix}/share/gpemu installed_data)
string(FIND "${last_output}" "data from ${installed_data}\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the example did not read the installed data in ${installed_data}:\n${last_output}")
endif()
foreach(f zoo/resnet50.json data/calibration.json configs/dlio/unet3d_a100.yaml)
  if(NOT EXISTS ${installed_data}/${f})
    message(FATAL_ERROR "the install lacks share/gpemu/${f}")
  endif()
endforeach()

# The Python module, when this build has one: the installed copy imports and
# finds the installed data (python3 itself lives elsewhere).
if(GPEMU_PYTHON_MODULE_DIR)
  file(WRITE ${GPEMU_WORK_DIR}/import_gpemu.py
       "import gpemu\nprint(gpemu.__file__)\nprint(gpemu.data_dir())\n")
  run("importing the installed Python module" ${CMAKE_COMMAND} -E env --unset=GPEMU_DATA_DIR
      PYTHONPATH=${prefix}/${GPEMU_PYTHON_MODULE_DIR} ${GPEMU_PYTHON} ${GPEMU_WORK_DIR}/import_gpemu.py)
  message(STATUS "${last_output}")
  string(FIND "${last_output}" "${prefix}/${GPEMU_PYTHON_MODULE_DIR}/gpemu" at_module)
  string(FIND "${last_output}" "${installed_data}" at_data)
  if(at_module EQUAL -1 OR at_data EQUAL -1)
    message(FATAL_ERROR "the installed Python module did not load from the prefix or read its data:\n${last_output}")
  endif()
endif()

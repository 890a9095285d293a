#!/usr/bin/env bash
# Set-up and test: installs dependencies, builds, and runs every test; then
# builds again with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)
# and runs the suite there too, except the tests labelled "python" (the
# tracer's tests: no C++ in them, nothing for a sanitizer to see; the
# Python module's and the torch backend's, which a sanitizer build does not
# build; and the reproduction suite's, Python driving the first build's gpemu)
# and "install"
# (the example consumer: builds a second program, a copy of what the first pass
# checked) and one C++ test, Validation.SharedGPEmuOomBoundaries: it bisects
# the batch size at every OOM point of GPEmu's profiles, the same zoo replay and
# caching-allocator code the ZooMemoryReference tests run under ASan, and takes
# 223 s of the pass's 6.5 minutes there (-O0); nor the four that walk all 49 zoo
# models through the CLI and the loader's FLOP check (CliModels.ListsTheZoo*,
# ZooLoader.ForwardFlopsPerSampleMatchTheHeaderForEveryModel,
# CliAnalyze.BenchDatastallListsFiveModelsBesideThePaper: 74 s there, the same
# zoo parsing the other ASan zoo tests run on fewer models); nor four accuracy
# checks against reference figures whose code the other ASan tests run
# (DlioSharedWorkloads.EveryOneRunsShrunkOrIsRefusedSayingWhy, the shared
# profiles' calibration check, ZooMemoryReference's OOM points and measured
# peaks: 77 s there; ZooMemoryReference.DefaultReplayOnV100ForTheRecord still
# replays the zoo under ASan). No test paces itself on the wall clock long
# enough to matter (the slowest real-clock tests take about a second).
# GPEMU_SKIP_ASAN=1 skips the second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 600)

# Each parser's libFuzzer harness for a short while under ASan + UBSan
# (scripts/fuzz.sh; run it with more seconds by hand for a deeper search).
GPEMU_FUZZ_SEED=${GPEMU_FUZZ_SEED:-1} bash scripts/fuzz.sh "${GPEMU_FUZZ_SECONDS:-6}"

if [[ "${GPEMU_SKIP_ASAN:-0}" != 1 ]]; then
  # clang, -O0, line tables (enough for the sanitizers' stack traces): with
  # ASan + UBSan an object compiles at -O0 in about the time of the release
  # build's -O2 -g with g++, and at -O1 in twice that (src/workload/job.cpp:
  # 12.3 s, 12.0 s, 25.4 s); clang++ compiles the same -O0 sanitizer objects
  # in 50-60 % of g++'s time (src/cost/validation.cpp 6.0 s against 10.4 s,
  # src/zoo/model_graph.cpp 5.3 s against 10.7 s, user CPU), which keeps
  # CI's two passes inside 30 minutes on 2 cores, and the second compiler
  # reads the code too. (The fuzz harnesses use the same clang.)
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 \
    -DCMAKE_CXX_COMPILER=clang++ -DGPEMU_SANITIZE=address \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" >/dev/null
  cmake --build build-asan -j"$(nproc)"
  cd build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j"$(nproc)" --timeout 900 -LE "python|install" \
    -E "^(Validation\.SharedGPEmu(OomBoundaries|ProfilesAgainstTheCommittedCalibration)|CliModels\.ListsTheZooAs(ATable|Json)|ZooLoader\.ForwardFlopsPerSampleMatchTheHeaderForEveryModel|CliAnalyze\.BenchDatastallListsFiveModelsBesideThePaper|DlioSharedWorkloads\.EveryOneRunsShrunkOrIsRefusedSayingWhy|ZooMemoryReference\.(MaxBatchAgainstGPEmuOomPoints|MatchesGPEmuMeasuredPeaksOn(A100|V100)))$"
fi

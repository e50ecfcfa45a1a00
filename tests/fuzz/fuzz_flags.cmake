# Compiler flags of the fuzz tree (BOXCAR_FUZZ=ON, scripts/fuzz): every library is built
# with libFuzzer's coverage instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer,
# and any UB report aborts, so the fuzzer counts it as a crash.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "BOXCAR_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14")
endif()
set(BOXCAR_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
# -O1 -g1: fast enough to fuzz, quick to build, and line numbers in every report.
add_compile_options(${BOXCAR_SANITIZERS} -fsanitize=fuzzer-no-link -fno-omit-frame-pointer -O1 -g1)
add_link_options(${BOXCAR_SANITIZERS})

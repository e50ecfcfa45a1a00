# boxcar_catch_tests(<target> PREFIX <prefix> [PROPERTIES <test properties>...]
#                    [ONE_PER_CASE <file stem>...])
#
# Registers the Catch2 cases of <target> with ctest, one test per source file: the test
# `<prefix><stem>.cpp` runs every visible case of <stem>.cpp, in declaration order, in one
# process (`<target> -# "[#<stem>]~[.]"`), so a file's cases pay for one process start
# (0.2 s under the sanitizers) instead of one each. Each case prints its name as it starts
# (support/catch_main.cpp) and Catch prints a failing case's name with its failure, so a
# failure or a timeout names its case. The files in ONE_PER_CASE, whose cases run for
# seconds each, get a test per case instead (`<prefix><case name>`, as catch_discover_tests
# names them), so that `ctest -j` spreads them over the cores. Hidden cases ([.] tags) are
# registered by hand where their wrapper runs them.
#
# Like catch_discover_tests, the list is made after each build of <target> (a new case
# or file needs no CMake edit): cmake/BoxcarCatchTestsAdd.cmake writes it and
# TEST_INCLUDE_FILES reads it.
set(BOXCAR_CATCH_TESTS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/BoxcarCatchTestsAdd.cmake)

function(boxcar_catch_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PREFIX" "PROPERTIES;ONE_PER_CASE")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "boxcar_catch_tests(${target}): unexpected ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  add_custom_command(
    TARGET ${target} POST_BUILD
    BYPRODUCTS "${tests_file}"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "TEST_PREFIX=${arg_PREFIX}"
            -D "TEST_PROPERTIES=${arg_PROPERTIES}"
            -D "TEST_ONE_PER_CASE=${arg_ONE_PER_CASE}"
            -D "CTEST_FILE=${tests_file}"
            -P "${BOXCAR_CATCH_TESTS_SCRIPT}"
    VERBATIM)
  file(WRITE "${include_file}"
    "if(EXISTS \"${tests_file}\")\n"
    "  include(\"${tests_file}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

# Run after each build of a test binary (cmake/BoxcarCatchTests.cmake): lists its source
# files (Catch's -# tags) and their visible cases, and writes the ctest script CTEST_FILE
# with one test per file, or per case for the files in TEST_ONE_PER_CASE.

cmake_policy(VERSION 3.20)

set(script "")
# One add_test or set_tests_properties line; arguments that are not plain words become
# bracket arguments, as in Catch2's own CatchAddTests.cmake.
function(add_command name)
  set(args "")
  foreach(arg IN LISTS ARGN)
    if(arg MATCHES "[^-./:a-zA-Z0-9_]")
      string(APPEND args " [==[${arg}]==]")
    else()
      string(APPEND args " ${arg}")
    endif()
  endforeach()
  string(APPEND script "${name}(${args})\n")
  set(script "${script}" PARENT_SCOPE)
endfunction()

function(list_cases spec out)
  execute_process(COMMAND "${TEST_EXECUTABLE}" "-#" "${spec}" --list-test-names-only
                  OUTPUT_VARIABLE output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  if(result LESS 0 OR NOT result MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${TEST_EXECUTABLE} ${spec} --list-test-names-only failed: ${result}\n${output}")
  endif()
  # A ';' would split the list (and catch_discover_tests cuts names there too).
  string(REPLACE ";" "\\;" output "${output}")
  string(REPLACE "\n" ";" output "${output}")
  list(FILTER output EXCLUDE REGEX "^$")
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

# "<stem>;<count>;..." for each file tag of the cases `spec` selects ("" for all).
function(count_by_file spec out)
  set(args "-#" --list-tags)
  if(spec)
    list(PREPEND args "${spec}")
  endif()
  execute_process(COMMAND "${TEST_EXECUTABLE}" ${args}
                  OUTPUT_VARIABLE output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  if(result LESS 0 OR NOT result MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${TEST_EXECUTABLE} ${args} failed: ${result}\n${output}")
  endif()
  # Lines such as "   8  [#accept_test]".
  string(REGEX MATCHALL "[0-9]+  \\[#[A-Za-z0-9_.+-]+\\]" lines "${output}")
  set(counts "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^([0-9]+)  \\[#(.*)\\]$" "\\2;\\1" pair "${line}")
    list(APPEND counts ${pair})
  endforeach()
  set(${out} "${counts}" PARENT_SCOPE)
endfunction()

if(NOT EXISTS "${TEST_EXECUTABLE}")
  message(FATAL_ERROR "no test executable ${TEST_EXECUTABLE}")
endif()
# Two runs of the binary find every file with a visible case (all cases less the hidden
# ones), and one more per ONE_PER_CASE file lists its cases: under the sanitizers each
# run takes 0.2 s.
count_by_file("" all)
count_by_file("[.]" hidden)
while(all)
  list(POP_FRONT all stem count)
  list(FIND hidden "${stem}" at)
  if(NOT at EQUAL -1)
    math(EXPR at "${at} + 1")
    list(GET hidden ${at} hidden_count)
    math(EXPR count "${count} - ${hidden_count}")
  endif()
  if(count EQUAL 0)
    continue()  # only hidden cases: their wrapper's test runs them
  endif()
  set(spec "[#${stem}]~[.]")
  if(stem IN_LIST TEST_ONE_PER_CASE)
    list_cases("${spec}" cases)
    foreach(case IN LISTS cases)
      # A name is a Catch test spec: escape what Catch would read as a separator or tag.
      set(filter "${case}")
      foreach(char , [ ])
        string(REPLACE "${char}" "\\${char}" filter "${filter}")
      endforeach()
      add_command(add_test "${TEST_PREFIX}${case}" "${TEST_EXECUTABLE}" "${filter}")
      add_command(set_tests_properties "${TEST_PREFIX}${case}" PROPERTIES
                  WORKING_DIRECTORY "${TEST_WORKING_DIR}" ${TEST_PROPERTIES})
    endforeach()
  else()
    add_command(add_test "${TEST_PREFIX}${stem}.cpp" "${TEST_EXECUTABLE}" "-#" "${spec}")
    add_command(set_tests_properties "${TEST_PREFIX}${stem}.cpp" PROPERTIES
                WORKING_DIRECTORY "${TEST_WORKING_DIR}" ${TEST_PROPERTIES})
  endif()
endwhile()

file(WRITE "${CTEST_FILE}" "${script}")

# boxcar_library(<part> SOURCES ... [PUBLIC <targets>...] [PRIVATE <targets>...])
#
# One Boxcar library per top-level folder: target boxcar_<part> (alias and export name
# boxcar::<part>), public headers under <folder>/include/boxcar/<part>/, sources under
# <folder>/src/. Dependencies must point down the layers drawn in docs/architecture.md;
# tests/layout/check_layers.cmake fails the build's tests when an include points up.
function(boxcar_library part)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;PUBLIC;PRIVATE")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_SOURCES)
    message(FATAL_ERROR "boxcar_library(${part}): SOURCES is required; unexpected: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(target boxcar_${part})
  add_library(${target} ${arg_SOURCES})
  add_library(boxcar::${part} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${part} OUTPUT_NAME ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${arg_PUBLIC} PRIVATE ${arg_PRIVATE} boxcar_warnings)
  install(TARGETS ${target} EXPORT boxcarTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  # The header check (tests/CMakeLists.txt) compiles each public header against its own
  # library only, so a header that leans on an undeclared dependency fails there.
  set_property(GLOBAL APPEND PROPERTY BOXCAR_LIBRARY_PARTS ${part})
  set_property(GLOBAL PROPERTY BOXCAR_INCLUDE_DIR_${part} ${CMAKE_CURRENT_SOURCE_DIR}/include)
endfunction()

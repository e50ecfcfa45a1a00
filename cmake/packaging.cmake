# Installing like software: a pkg-config file (boxcar.pc), the systemd units and an example
# environment file, installed with the libraries, headers, CMake package config and `boxcar`
# CLI by `cmake --install`; and the Debian package of all of it (`cpack -G DEB` in the build
# directory, docs/development.md), installed under /usr. tests/package/ installs the .deb
# into an empty root and builds tests/install_consumer against it.

# boxcar.pc is written at install time, not at configure time: the prefix it names must be
# the one installed into (/usr inside the package, whatever `cmake --install --prefix` says
# otherwise), and only the install step knows it. CPACK_SET_DESTDIR (below) makes the
# package's install step see /usr rather than its staging directory. Written straight to
# its destination, so two installs running at once (ctest -j) never share a file.
install(CODE "
  set(BOXCAR_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(BOXCAR_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(BOXCAR_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(BOXCAR_PC_VERSION \"${PROJECT_VERSION}\")
  set(boxcar_pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/boxcar.pc\")
  message(STATUS \"Installing: \${boxcar_pc}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/boxcar.pc.in\" \"\${boxcar_pc}\" @ONLY)
")

# systemd looks in /usr/lib/systemd/system (Debian 12 merges /lib into /usr/lib); relative to
# the prefix, so a `cmake --install --prefix DIR` keeps them inside DIR.
install(FILES packaging/systemd/boxcar-publisher.service packaging/systemd/boxcar-worker@.service
        DESTINATION lib/systemd/system)
install(FILES packaging/publisher.env DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# A release package carries no debug information: CPACK_STRIP_FILES strips the executable,
# and this strips the static archives, which install(TARGETS) leaves alone (276 MB -> 15 MB).
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    file(GLOB boxcar_archives \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libboxcar_*.a\")
    foreach(archive IN LISTS boxcar_archives)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${archive}\" COMMAND_ERROR_IS_FATAL ANY)
    endforeach()
  endif()
")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME boxcar)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Boxcar")
set(CPACK_PACKAGE_CONTACT "Boxcar maintainers <boxcar@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Transactional inbox/outbox runtime on PostgreSQL and Kafka")
set(CPACK_PACKAGE_DESCRIPTION
    "The boxcar command (migrate, publisher, status, dead records), systemd units for the\n\
publisher and for an application's worker, and the C++20 static libraries, headers,\n\
CMake package config (find_package(boxcar)) and pkg-config file (boxcar) to build\n\
applications on Boxcar.")
# Installed under /usr whatever CMAKE_INSTALL_PREFIX the build tree has. With SET_DESTDIR the
# install step runs with prefix CPACK_INSTALL_PREFIX and DESTDIR the staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # boxcar_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Debian 12 names. The boxcar binary's shared libraries (a test checks each NEEDED entry is
# listed here), and the -dev packages an application needs to compile Boxcar's headers and
# link its static libraries (their private dependencies included: civetweb, rdkafka,
# prometheus-cpp, OpenSSL). libpqxx 7 changed the API the headers use, hence the upper bound.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.36), libstdc++6 (>= 12), libgcc-s1, libpq5, libpqxx-6.4, librdkafka1 (>= 2.0.2), \
libprometheus-cpp-core1.0, libspdlog1.10, libfmt9, libssl3, libcivetweb1, \
libpqxx-dev (>= 6.4), libpqxx-dev (<< 7), libpq-dev, nlohmann-json3-dev (>= 3.10), librdkafka-dev (>= 2.0.2), \
prometheus-cpp-dev, libspdlog-dev, libssl-dev, libcivetweb-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "cmake (>= 3.25) | pkg-config, g++ (>= 4:12)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql (>= 15), systemd")
include(CPack)

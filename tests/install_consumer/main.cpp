// An application built against an installed Boxcar: tests/package/deb_install_test.sh
// builds it with CMake and with pkg-config against the installed .deb. Without arguments
// it checks a fingerprint end to end (boxcar::inbox); with arguments it is the standard
// command line, boxcar::run_cli (boxcar::runtime), which links every Boxcar library and
// dependency.
#include <iostream>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/runtime/runtime.hpp"

int main(int argc, char** argv) {
  if (argc > 1) return boxcar::run_cli(argc, argv);
  const auto canonical = boxcar::canonicalize(nlohmann::json::parse(R"({"b":1,"a":[true,null]})"));
  std::cout << canonical << " " << boxcar::content_fingerprint("e", 1, canonical) << "\n";
  return canonical == R"({"a":[true,null],"b":1})" ? 0 : 1;
}

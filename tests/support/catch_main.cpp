// The shared Catch2 v2 main for every test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <iostream>

namespace {

// ctest runs a source file's cases in one process (cmake/BoxcarCatchTests.cmake) and shows
// the output of a failed run: each case's name as it starts says which case a timeout, a
// crash or a sanitizer report came from, which Catch's own report of a failure cannot.
class CaseNames : public Catch::TestEventListenerBase {
 public:
  using Catch::TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    std::cout << "-- case: " << info.name << std::endl;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(CaseNames)

// boxcar::testing::eventually and eventually_equals: the waits every suite uses.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>

#include "boxcar/testing/eventually.hpp"

using namespace boxcar::testing;
using namespace std::chrono_literals;

TEST_CASE("eventually returns true once the condition holds, asking until it does") {
  int asked = 0;
  CHECK(eventually([&] { return ++asked == 3; }, 10s));
  CHECK(asked == 3);
}

TEST_CASE("eventually gives up after its limit with the condition's last answer") {
  int asked = 0;
  CHECK_FALSE(eventually([&] { return ++asked < 0; }, 50ms));
  CHECK(asked >= 2);  // asked during the limit and once more after it
}

TEST_CASE("eventually_equals returns the last value read, so a failed check shows it") {
  int value = 0;
  const std::function<int()> read = [&] { return ++value; };
  CHECK(eventually_equals(read, 4, 10s) == 4);
  CHECK(eventually_equals(std::function<int()>([] { return 7; }), 8, 50ms) == 7);
}

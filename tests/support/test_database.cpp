// The test cluster's URL, as a Catch failure when scripts/test did not set it.
#include "test_database.hpp"

#include <cstdlib>

#include <catch2/catch.hpp>

namespace boxcar::testing {

std::string database_url() {
  const char* url = std::getenv("BOXCAR_TEST_DATABASE_URL");
  if (!url || !*url) FAIL("BOXCAR_TEST_DATABASE_URL is not set: run the tests with scripts/test");
  return url;
}

}  // namespace boxcar::testing

#include <catch2/catch.hpp>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/inbox/detail/error_text.hpp"

using namespace std::chrono_literals;
using boxcar::backoff_ceiling;
using boxcar::backoff_delay;

TEST_CASE("backoff ceilings double per attempt up to the cap") {
  const boxcar::BackoffOptions options{.base = 100ms, .cap = 1000ms};
  CHECK(backoff_ceiling(options, 1) == 100ms);
  CHECK(backoff_ceiling(options, 2) == 200ms);
  CHECK(backoff_ceiling(options, 4) == 800ms);
  CHECK(backoff_ceiling(options, 5) == 1000ms);
  CHECK(backoff_ceiling(options, 60) == 1000ms);
}

TEST_CASE("backoff delays are full jitter: spread over zero to the ceiling") {
  const boxcar::BackoffOptions options{.base = 1000ms, .cap = 60000ms};
  std::chrono::milliseconds low{1000000}, high{0};
  for (int i = 0; i < 2000; ++i) {
    const auto d = backoff_delay(options, 3);
    REQUIRE(d >= 0ms);
    REQUIRE(d <= 4000ms);
    low = std::min(low, d);
    high = std::max(high, d);
  }
  CHECK(low < 400ms);
  CHECK(high > 3600ms);
}

TEST_CASE("stored error text is bounded, visibly truncated and valid UTF-8") {
  using boxcar::detail::bounded_error_text;
  CHECK(bounded_error_text("short", 100) == "short");
  const std::string long_text(5000, 'x');
  const auto bounded = bounded_error_text(long_text, 100);
  CHECK(bounded == std::string(100, 'x') + "…[truncated 4900 bytes]");
  CHECK(bounded_error_text(std::string("a\xff"
                                       "b\0c",
                                       5),
                           100) == "a?b?c");
  // A multi-byte character is never cut in half.
  const auto euro = bounded_error_text("ab€€", 4);
  CHECK(boxcar::is_valid_utf8(euro));
  CHECK(euro == "ab…[truncated 6 bytes]");
}

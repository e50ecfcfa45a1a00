// The publisher options the kafka suites share: short leases, timeouts and backoff against
// librdkafka's mock cluster, so a failure path takes milliseconds instead of seconds.
#pragma once

#include <chrono>
#include <string>

#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"

namespace boxcar::testing {

inline PublisherOptions fast_publisher_options(const std::string& schema, const MockKafka& kafka) {
  using namespace std::chrono_literals;
  return {.schema = schema,
          .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}},
          .batch_size = 100,
          .lease = 8s,
          .delivery_timeout = 2s,
          .backoff = {.base = 10ms, .cap = 50ms},
          .poll_interval = 100ms};
}

}  // namespace boxcar::testing

// A handler that ignores its cancellation signal, for the tests of abandonment: it loops
// until the test lets it go and, with `keep_querying`, keeps issuing statements on its
// (aborted) transaction, so the server never sees the session idle and only a terminated
// session releases its locks.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "worker_fixture.hpp"

namespace boxcar::testing {

struct StuckHandler {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  bool keep_querying = false;
  void run(HandlerContext& c, const std::string& table) {
    insert_app_row(table, c);
    started = true;
    while (!release) {
      if (keep_querying) {
        try {
          c.tx.exec("SELECT 1");
        } catch (...) {
          // Ignores that too.
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

}  // namespace boxcar::testing

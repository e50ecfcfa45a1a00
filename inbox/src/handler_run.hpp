// What a handler transaction shares between the plain and the batch-handler paths: the
// failures thrown into the failure path, their texts, RunningHandlers and HandlerTimer.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "boxcar/core/cancellation.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/inbox/detail/deadline_watchdog.hpp"
#include "in_flight_registry.hpp"

namespace boxcar::detail {

// Thrown into the failure path when a handler returned after its deadline: whatever it
// wrote must not commit.
struct HandlerTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown into the failure path when a handler ended the worker's transaction with a raw
// COMMIT, ROLLBACK or END: its writes may already be durable without the completion, and
// a retry would repeat them, so the receipt goes DEAD for an operator to look at.
struct HandlerEndedTransaction : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kEndedTransactionText =
    "the handler ended the worker's transaction (a raw COMMIT, ROLLBACK or END through context.tx); "
    "writes made before and after it may have committed without the completion, so the message is "
    "not retried";
inline constexpr const char* kEndedBatchText =
    "a handler of its batch ended the worker's shared transaction (a raw COMMIT, ROLLBACK or END through "
    "context.tx); this message's writes may have committed without the completion, so it is not retried";

// The C++ name of an exception's dynamic type, for failure texts ("std::runtime_error");
// the mangled name when it cannot be demangled. Defined in outcome_recorder.cpp.
std::string demangled_type(const std::type_info& type);

using Clock = std::chrono::steady_clock;

// While handlers run on `tx`: registered for shutdown, and watched by the deadline, which
// fires their signal and cancels the running query. `session` is the server session and
// transaction of `tx`, as its lock statement returned them: what an abandonment
// terminates. `abandoned`, when given, tells afterwards whether the supervisor gave the
// thread up meanwhile.
class RunningHandlers {
 public:
  RunningHandlers(InFlightRegistry& registry, DeadlineWatchdog& watchdog, CancellationSource& source, Tx& tx,
                  ServerSession session, Clock::time_point deadline, bool* abandoned = nullptr)
      : registry_(registry),
        key_(registry.add({&source, &tx.connection(), deadline, session})),
        abandoned_(abandoned),
        armed_(watchdog, deadline, [&source, &connection = tx.connection()] {
          source.cancel();
          try {
            connection.cancel_query();
          } catch (...) {
            // The server is unreachable (PQcancel connects anew): the signal has fired,
            // and the attempt's statement_timeout ends the query on the server.
          }
        }) {}
  ~RunningHandlers() {
    const bool abandoned = registry_.remove(key_);
    if (abandoned_) *abandoned_ = abandoned;
  }
  RunningHandlers(const RunningHandlers&) = delete;
  RunningHandlers& operator=(const RunningHandlers&) = delete;

 private:
  InFlightRegistry& registry_;
  std::size_t key_;
  bool* abandoned_;
  DeadlineWatchdog::Armed armed_;
};

// One handler call's duration, recorded in boxcar_worker_handler_duration_seconds when
// the call ends, whether it returned or threw.
class HandlerTimer {
 public:
  HandlerTimer(const std::shared_ptr<Metrics>& metrics, const std::string& consumer)
      : metrics_(metrics), consumer_(consumer), started_(Clock::now()) {}
  ~HandlerTimer() {
    if (metrics_) metrics_->handler_duration(consumer_, std::chrono::duration<double>(Clock::now() - started_).count());
  }
  HandlerTimer(const HandlerTimer&) = delete;
  HandlerTimer& operator=(const HandlerTimer&) = delete;

 private:
  const std::shared_ptr<Metrics>& metrics_;
  const std::string& consumer_;
  Clock::time_point started_;
};

}  // namespace boxcar::detail

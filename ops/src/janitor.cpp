// The janitor: leader election on a session of its own, then run_retention (retention.cpp).
#include "boxcar/ops/janitor.hpp"

#include <atomic>
#include <mutex>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/periodic_thread.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/redaction.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "retention_queries.hpp"

namespace boxcar {

struct Janitor::State {
  std::mutex run_mutex;  // one run at a time; guards session
  std::unique_ptr<pqxx::connection> session;
  std::atomic<bool> leader{false};
  std::atomic<int> backend_pid{0};

  detail::PeriodicThread thread;
};

Janitor::Janitor(JanitorOptions options) : options_(std::move(options)), state_(std::make_unique<State>()) {
  validate_schema_name(options_.schema);
  validate_retention(options_.retention);
  if (options_.interval.count() < 1) throw ConfigError("retention.interval_ms", "must be at least 1 ms");
}

Janitor::~Janitor() { stop(); }

void Janitor::start() {
  state_->thread.start(options_.interval, [this] { run_once(); });
}

void Janitor::stop() {
  state_->thread.stop();
  std::lock_guard run(state_->run_mutex);
  state_->session.reset();  // closing the session frees the lock
  state_->leader = false;
  state_->backend_pid = 0;
  if (options_.metrics) options_.metrics->set_janitor_leader(false);
}

std::optional<PurgeReport> Janitor::run_once() {
  std::lock_guard run(state_->run_mutex);
  try {
    if (!state_->session || !state_->session->is_open()) {
      state_->leader = false;
      state_->session = detail::open_connection(options_.connection_string);
      state_->backend_pid = state_->session->backendpid();
    }
    if (!state_->leader) {
      pqxx::nontransaction statement(*state_->session);
      state_->leader =
          statement.exec_params1(detail::retention_sql::kTryLeaderLock, options_.schema)["leader"].as<bool>();
      if (options_.metrics) options_.metrics->set_janitor_leader(state_->leader);
      if (state_->leader) logger("retention")->info("janitor of schema {} is now this process", options_.schema);
    }
    if (!state_->leader) return std::nullopt;
    const auto report = run_retention(*state_->session, options_.schema, options_.retention);
    if (options_.metrics)
      options_.metrics->janitor_run(report.outbox_skipped.empty(), report.outbox_partitions_created,
                                    report.outbox_partitions_retired, report.inbox_deleted + report.inbox_dead_deleted,
                                    report.outbox_deleted, report.outbox_partitions_blocked);
    return report;
  } catch (const std::exception& e) {
    // A lost session lost the lock with it; any other failure (a DDL refused, a lock
    // timeout) also starts over with a new session, which gives the lock back: another
    // janitor may do better meanwhile.
    const std::string why = e.what();
    const bool was_leader = state_->leader.exchange(false);
    state_->session.reset();
    state_->backend_pid = 0;
    if (options_.metrics) {
      options_.metrics->set_janitor_leader(false);
      options_.metrics->janitor_run(false, 0, 0, 0, 0, 0);
    }
    logger("retention")
        ->warn("janitor run failed (schema {}, was leader: {}): {}", options_.schema, was_leader,
               redact_connection_error(why, options_.connection_string));
    return std::nullopt;
  }
}

bool Janitor::leader() const { return state_->leader; }

int Janitor::backend_pid() const { return state_->backend_pid; }

}  // namespace boxcar

// The janitor: retention (run_retention, retention.hpp) run periodically by one process per
// schema, elected with a session-level PostgreSQL advisory lock held on a connection of
// its own. When that session ends (the process dies, its connection is lost) the lock goes
// with it and the next janitor to try takes over. Runs in the Runtime host when
// retention.janitor is true (docs/operations.md, "Janitor").
//
// Thread-safety: start(), stop(), run_once(), leader() and backend_pid() may be called
// from any thread; one run at a time.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "boxcar/core/metrics.hpp"
#include "boxcar/ops/retention.hpp"

namespace boxcar {

struct JanitorOptions {
  /// retention.janitor: whether the Runtime runs one (the Janitor class ignores it).
  bool enabled = false;
  /// libpq URL of the janitor's own session; the Runtime fills in database.url. The role
  /// must own the schema's tables or be a member of their owner (the migrator role).
  std::string connection_string{};
  std::string schema = "boxcar";
  /// What each run keeps and removes.
  PurgeOptions retention{};
  /// Time between two runs (and between two tries for the lock of a janitor that is not
  /// the leader); the first runs as soon as start() is called.
  std::chrono::milliseconds interval{60000};
  /// boxcar_janitor_* metrics; null: none.
  std::shared_ptr<Metrics> metrics{};
};

class Janitor {
 public:
  /// Validates the options (validate_retention); opens no connection.
  /// @throws ConfigError
  explicit Janitor(JanitorOptions options);
  ~Janitor();  // stop()
  Janitor(const Janitor&) = delete;
  Janitor& operator=(const Janitor&) = delete;

  /// Starts the background thread: run_once() every interval. Idempotent.
  void start();
  /// Stops the thread after its current run and closes the session (freeing the lock).
  /// Idempotent.
  void stop();

  /// Opens the session if needed, tries for the lock unless held, and when leader runs
  /// retention once. Returns the run's report, or nothing when another janitor leads.
  /// Never throws for a database failure: it drops the session (and leadership), logs,
  /// counts an error run and returns nothing; the next call starts over.
  std::optional<PurgeReport> run_once();

  /// Whether this janitor held the lock at the end of its last run_once().
  bool leader() const;
  /// The backend pid of its session; 0 without one (for tests and logs).
  int backend_pid() const;

 private:
  struct State;
  JanitorOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace boxcar

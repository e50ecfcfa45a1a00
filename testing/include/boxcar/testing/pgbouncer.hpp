// Debian's pgbouncer, started on loopback in front of a test database with its own ini and
// userlist, for tests and benchmarks that run Boxcar behind a connection pooler:
//
//   boxcar::testing::PgBouncer bouncer(db.url(), {.pool_mode = "transaction"});
//   config.pool.url = bouncer.route(db.url());      // through PgBouncer
//   config.pool.session_url = db.url();             // LISTEN, migrations: direct
//
// The database must accept the URL's user without a password from 127.0.0.1 (trust), as
// the throw-away clusters of scripts/lib/postgres.sh do. PgBouncer refuses to run as root:
// under root it is started as root and drops to `run_as_user` (ini `user`).
// Thread-safety: none needed; the object only owns the process.
#pragma once

#include <sys/types.h>

#include <string>

namespace boxcar::testing {

struct PgBouncerOptions {
  /// "session" or "transaction" (pool_mode).
  std::string pool_mode = "transaction";
  /// Server connections per user and database (default_pool_size).
  int pool_size = 20;
  /// The pgbouncer executable.
  std::string program = "/usr/sbin/pgbouncer";
  /// The account pgbouncer drops to when started as root (ini `user`).
  std::string run_as_user = "postgres";
};

class PgBouncer {
 public:
  /// Starts pgbouncer listening on a free 127.0.0.1 port below the ephemeral range and
  /// forwarding every database to `database_url`'s host and port; returns once it accepts
  /// connections. @throws std::runtime_error (with pgbouncer's output) when it does not
  /// start within 10 s.
  explicit PgBouncer(const std::string& database_url, PgBouncerOptions options = {});
  /// SIGTERM (SIGKILL after 5 s), then the directory with the ini and userlist goes.
  ~PgBouncer();
  PgBouncer(const PgBouncer&) = delete;
  PgBouncer& operator=(const PgBouncer&) = delete;

  /// Whether `program` exists (scripts/setup installs Debian's pgbouncer).
  static bool available(const std::string& program = PgBouncerOptions{}.program);

  int port() const { return port_; }
  /// `url` (postgresql://user@host:port/db) rewritten to go through PgBouncer.
  std::string route(const std::string& url) const;
  /// What pgbouncer wrote to stdout and stderr so far.
  std::string output() const;

 private:
  bool start_on(int port);
  void stop() noexcept;

  PgBouncerOptions options_;
  std::string directory_;
  std::string target_host_;
  std::string target_port_;
  std::string user_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace boxcar::testing

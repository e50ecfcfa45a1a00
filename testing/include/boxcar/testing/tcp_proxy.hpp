// A loopback TCP proxy in front of PostgreSQL that can lose a connection at an exact
// protocol moment: after the server answered a request (the write committed, the client
// never hears) or before the request reaches the server (nothing happened). This is the
// real fault behind an uncertain commit. Applications use it to test their own handling
// of a lost connection:
//
//   boxcar::testing::TcpProxy proxy("127.0.0.1", 5432);
//   auto pool = boxcar::ConnectionPool::create({.url = proxy.route(db.url())});
//   proxy.drop_response_to("COMMIT");   // the next COMMIT lands, its answer never does
//   proxy.drop_response_to_commit();    // the same for a worker's handler transaction
//
// Loopback only. Thread-safety: the fault switches may be called from any thread.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace boxcar::testing {

class TcpProxy {
 public:
  TcpProxy(std::string target_host, int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  /// `url` (postgresql://user@host:port/db) rewritten to go through the proxy.
  std::string route(const std::string& url) const;

  /// The next client request is forwarded, the server's answer is swallowed and both
  /// sides are closed.
  void drop_next_response() { mode_ = Mode::DropResponse; }
  /// The next client request is not forwarded; both sides are closed.
  void drop_next_request() { mode_ = Mode::DropRequest; }
  /// While down, every open connection is cut and new ones are closed at once: the
  /// database is unreachable for the clients behind the proxy, as in an outage.
  void set_down(bool down) { down_ = down; }
  /// Like drop_next_response(), but for the next simple-protocol query exactly `sql` (e.g.
  /// "COMMIT") on any connection; other requests pass meanwhile.
  void drop_response_to(const std::string& sql) { arm(Mode::DropResponseTo, sql); }
  /// Like drop_next_response(), but for the next execution of the prepared statement
  /// `name` (an extended-protocol Bind of it on the unnamed portal, as libpq sends), e.g.
  /// an autocommit statement whose commit lands while its answer never does.
  void drop_response_to_statement(const std::string& name) { arm_statement(Mode::DropResponseToStatement, name); }
  /// Like drop_next_request(), but for the next execution of the prepared statement `name`.
  void drop_request_of_statement(const std::string& name) { arm_statement(Mode::DropRequestOfStatement, name); }
  /// Like drop_next_request(), but for the next simple-protocol query exactly `sql`.
  void drop_request_of(const std::string& sql) { arm(Mode::DropRequestOf, sql); }
  /// Like drop_response_to("COMMIT"), for the next simple-protocol query that ends in a
  /// COMMIT: a plain one, or the worker's commit that resets the session on the way
  /// (boxcar::Tx::commit_and_reset_session sends the reset and COMMIT as one string).
  void drop_response_to_commit() { arm(Mode::DropResponseTo, "COMMIT", true); }
  /// Like drop_request_of("COMMIT"), for the next query that ends in a COMMIT.
  void drop_request_of_commit() { arm(Mode::DropRequestOf, "COMMIT", true); }
  /// How many connections a fault was injected into.
  int faults() const { return faults_; }
  /// How many connections clients opened through the proxy (refused ones included): a
  /// test's measure of how often its code connects.
  int connections() const { return connections_; }
  /// The local ports of the proxy's connections to the target, one per connection it
  /// forwarded: the server sees them as its clients' ports (pg_stat_activity.client_port),
  /// which tells this proxy's sessions from those of other clients of the same database.
  std::vector<int> server_side_ports() const;

 private:
  enum class Mode {
    Pass,
    DropResponse,
    DropRequest,
    DropResponseTo,
    DropRequestOf,
    DropResponseToStatement,
    DropRequestOfStatement
  };
  /// `ends_in_commit`: also match a multi-statement query whose last statement is COMMIT.
  void arm(Mode mode, const std::string& sql, bool ends_in_commit = false);
  void arm_statement(Mode mode, const std::string& name);
  /// Whether the client's bytes carry the armed query; consumes the fault when they do.
  bool take_query_fault(Mode mode, std::string_view bytes);
  void accept_loop();
  void pump(int client, int server);

  std::string host_;
  int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<Mode> mode_{Mode::Pass};
  std::mutex query_mutex_;
  std::string query_message_;  // the armed Query message, as it goes over the wire
  bool any_commit_ = false;    // arm(..., ends_in_commit): query_message_ is a plain COMMIT
  std::atomic<int> faults_{0};
  std::atomic<int> connections_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> down_{false};
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<std::thread> pumps_;
  std::vector<int> server_side_ports_;
};

}  // namespace boxcar::testing

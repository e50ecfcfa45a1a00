// The libpqxx transaction under every boxcar::Tx: libpqxx 6.4's read-committed `work`,
// except that its owner may replace the COMMIT it sends with a multi-statement string
// that ends in COMMIT (Tx::commit_and_reset_session), so work that must happen before the
// connection is reused rides on the commit's round trip.
#pragma once

#include <string>
#include <utility>

#include <pqxx/pqxx>

namespace boxcar::detail {

class TransactionWork final : public pqxx::work {
 public:
  explicit TransactionWork(pqxx::connection_base& connection)
      : pqxx::internal::namedclass{fullname("transaction", isolation_tag::name()), ""}, pqxx::work(connection) {}

  /// What commit() sends: "COMMIT", or statements that end with it. A failure before
  /// the COMMIT leaves the server in an aborted transaction block: the caller must close
  /// the connection then.
  void set_commit_command(std::string command) { commit_command_ = std::move(command); }

 private:
  // libpqxx 6.4's basic_transaction::do_commit with our command: an answer lost with
  // the connection, or libpqxx's own "completion unknown", leaves the outcome in doubt.
  void do_commit() override;

  std::string commit_command_ = "COMMIT";
};

}  // namespace boxcar::detail

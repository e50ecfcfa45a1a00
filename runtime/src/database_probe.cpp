// DatabaseProbe: the readiness check's own long-lived session.
#include "database_probe.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/redaction.hpp"

namespace boxcar::detail {

namespace {
// application_name is one of the parameters PgBouncer tracks per client, so a session SET
// of it is safe even behind transaction pooling.
constexpr const char* kSessionSetup = "SET application_name = 'boxcar-readiness'";
// A check must end well within probes.readiness_max_age_ms even when a statement hangs
// (a lock on schema_migrations held by a migration in progress). SET LOCAL, in the check's
// own transaction: behind PgBouncer in transaction pooling a session SET would stay on
// whichever server connection ran it and cut other clients' statements short.
constexpr const char* kCheckSetup =
    "SELECT pg_catalog.set_config('statement_timeout', '5000', true), "
    "pg_catalog.set_config('lock_timeout', '2000', true)";
}  // namespace

DatabaseProbe::DatabaseProbe(std::string connection_string, std::string schema)
    : connection_string_(std::move(connection_string)), schema_(std::move(schema)) {}

DatabaseProbe::Result DatabaseProbe::probe() noexcept {
  try {
    if (!connection_ || !connection_->is_open()) {
      connection_.reset();
      try {
        auto connection = detail::open_connection(connection_string_);
        pqxx::nontransaction(*connection).exec(kSessionSetup);
        connection_ = std::move(connection);
      } catch (...) {
        throw to_database_error(std::current_exception(), "connecting for the readiness check", false);
      }
    }
    SchemaCompatibility schema;
    try {
      pqxx::read_transaction tx(*connection_);
      tx.exec(kCheckSetup);
      schema = check_schema_compatibility(tx, {.schema = schema_});
    } catch (const Error&) {
      throw;
    } catch (...) {
      throw to_database_error(std::current_exception(), "checking the applied migrations", false);
    }
    return {.schema = std::move(schema), .error = {}};
  } catch (const std::exception& e) {
    connection_.reset();  // the next check opens a new session
    return {.schema = std::nullopt, .error = redact_secrets(e.what())};
  } catch (...) {
    connection_.reset();
    return {.schema = std::nullopt, .error = "unknown error"};
  }
}

}  // namespace boxcar::detail

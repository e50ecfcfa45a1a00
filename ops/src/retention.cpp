// `boxcar purge`: retention of finished rows, the janitor role (SQL in
// operator_queries.hpp; rendering in operator_format.cpp).
#include <algorithm>
#include <limits>

#include <spdlog/spdlog.h>

#include "boxcar/ops/retention.hpp"
#include "boxcar/core/logging.hpp"
#include "operator_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {

PurgeReport purge(ConnectionPool& pool, const std::string& schema, const PurgeOptions& options) {
  if (options.inbox_retention.count() < 0 || options.outbox_retention.count() < 0)
    throw OperatorError("PURGE_INVALID", "retention must not be negative");
  if (options.batch_size == 0) throw OperatorError("PURGE_INVALID", "batch_size must be at least 1");
  const auto batch = static_cast<long long>(std::min<std::size_t>(options.batch_size, std::numeric_limits<int>::max()));
  const auto inbox_seconds =
      static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(options.inbox_retention).count());
  const auto outbox_seconds =
      static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(options.outbox_retention).count());

  PurgeReport report{.dry_run = options.dry_run};
  if (options.dry_run) {
    const auto inbox_sql = detail::operator_statement(detail::operator_sql::kPurgeInboxCount, schema);
    const auto outbox_sql = detail::operator_statement(detail::operator_sql::kPurgeOutboxCount, schema);
    detail::with_operator_connection(pool, "purge (dry run)", false, [&](pqxx::connection& c) {
      pqxx::nontransaction statement(c);
      report.inbox_deleted = statement.exec_params1(inbox_sql, inbox_seconds)["past_retention"].as<std::int64_t>();
      report.outbox_deleted = statement.exec_params1(outbox_sql, outbox_seconds)["past_retention"].as<std::int64_t>();
    });
  } else {
    // Each batch is an autocommit DELETE: locks are held for one batch only, and vacuum
    // can reclaim earlier batches while later ones run.
    const auto drain = [&](const char* text, long long seconds, std::int64_t& deleted, std::int64_t& batches) {
      const auto sql = detail::operator_statement(text, schema);
      detail::with_operator_connection(pool, "purge", true, [&](pqxx::connection& c) {
        pqxx::nontransaction statement(c);
        while (true) {
          const auto n = static_cast<long long>(statement.exec_params(sql, seconds, batch).affected_rows());
          deleted += n;
          ++batches;
          if (n < batch) break;
        }
      });
    };
    drain(detail::operator_sql::kPurgeInbox, inbox_seconds, report.inbox_deleted, report.inbox_batches);
    drain(detail::operator_sql::kPurgeOutbox, outbox_seconds, report.outbox_deleted, report.outbox_batches);
  }
  logger("operator")
      ->info(
          "purge dry_run={} inbox_deleted={} inbox_batches={} outbox_deleted={} outbox_batches={} "
          "inbox_retention={}h outbox_retention={}h batch_size={}",
          options.dry_run, report.inbox_deleted, report.inbox_batches, report.outbox_deleted, report.outbox_batches,
          options.inbox_retention.count(), options.outbox_retention.count(), options.batch_size);
  return report;
}

}  // namespace boxcar

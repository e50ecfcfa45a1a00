// Shared pieces of the worker tests: an application table without a unique constraint
// (so a double commit would show as two rows); handlers from lambdas come from the kit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "boxcar/inbox/handler.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/lambda_handler.hpp"
#include "test_database.hpp"

namespace boxcar::testing {

/// Creates {schema}.app_rows (message_id text, attempt int) with no unique constraint.
inline void create_app_table(TestDatabase& db) {
  db.query("CREATE TABLE {schema}.app_rows (message_id text NOT NULL, attempt int NOT NULL)");
}

/// The handler write every test uses: one app row in context.tx.
inline void insert_app_row(const std::string& schema_qualified_table, HandlerContext& context) {
  context.tx.exec("INSERT INTO " + schema_qualified_table + " (message_id, attempt) VALUES ($1, $2)",
                  context.message_id, context.attempt);
}

/// A registration for `consumer` whose handler writes one app row (insert_app_row) for
/// thing.happened v1: the handler of most worker tests.
inline HandlerRegistration app_row_writer(const std::string& consumer, std::string schema_qualified_table) {
  return {.consumer = consumer,
          .supports = {{"thing.happened", 1}},
          .handler = handler([table = std::move(schema_qualified_table)](const nlohmann::json&, HandlerContext& c) {
            insert_app_row(table, c);
          })};
}

/// The deadline the worker set for `tx`, in ms: (statement_timeout,
/// idle_in_transaction_session_timeout), read inside a handler.
inline std::pair<long long, long long> transaction_deadline_ms(TxView tx) {
  const auto row = tx.exec(
      "SELECT (extract(epoch FROM current_setting('statement_timeout')::interval) * 1000)::bigint, "
      "(extract(epoch FROM current_setting('idle_in_transaction_session_timeout')::interval) * 1000)::bigint")[0];
  return {row[0].as<long long>(), row[1].as<long long>()};
}

inline AcceptRequest message(const std::string& consumer, const std::string& id,
                             const std::string& event_type = "thing.happened", int version = 1) {
  return {.scope = Scope::tenant("t1"),
          .source = "test",
          .consumer = consumer,
          .message_id = id,
          .event_type = event_type,
          .schema_version = version,
          .payload = {{"id", id}}};
}

}  // namespace boxcar::testing

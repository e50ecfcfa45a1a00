// The plans of the worker's statements guarded by a claim token. The planner is shown the
// statistics of an inbox with no claim in flight (what ANALYZE usually sees: claims live
// for milliseconds); a `status = 'PROCESSING'` predicate then made it scan the partial
// index inbox_receipts_leases whole, which under load holds every claim in flight and the
// dead entries of those before, instead of reading one row by its primary key
// (inbox/src/worker_queries.hpp; docs/benchmarks.md, "Guarded statements name no status").
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/inbox/detail/named_statements.hpp"
#include "named_statement.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;

TEST_CASE("the worker's token-guarded statements read receipts by primary key, never the whole leases index") {
  TestDatabase db;
  db.execute(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, status, completed_at) "
      "SELECT 'tenant', 't1', 'test', 'orders.v1', 'm-' || i, 'thing.happened', 1, '{}', repeat('a', 64), "
      "'COMPLETED', now() FROM generate_series(1, 20000) AS i");
  db.execute("ANALYZE {schema}.inbox_receipts");
  const std::string token = "'00000000-0000-4000-8000-000000000000'";
  // Each statement with arguments of its parameters' types (inbox/src/worker_queries.hpp).
  const std::vector<std::pair<std::string, std::string>> statements = {
      // The locks, which also carry the transaction's deadline in two sub-selects.
      {"worker.lock", "1, " + token + ", '1000', '1500'"},
      {"worker.lock_many", "'{1,2}', '{" + token.substr(1, 36) + "," + token.substr(1, 36) + "}', '1000', '1500'"},
      {"worker.start_solo", "1, " + token},
      {"worker.complete", "1, " + token + ", '1'"},
      {"worker.complete_many", "'{1,2}', '{" + token.substr(1, 36) + "," + token.substr(1, 36) + "}', '1', '{}', '{}'"},
      {"worker.complete_many", "'{1,2}', '{" + token.substr(1, 36) + "," + token.substr(1, 36) + "}', '1', '{1}', '{" +
                                   token.substr(1, 36) + "}'"},
      {"worker.fail", "1, " + token + ", 10, false, 5, 'E', 'failed', 'HANDLER_PERMANENT'"},
      {"worker.hand_back", "'{1,2}', '{" + token.substr(1, 36) + "," + token.substr(1, 36) + "}', 0"},
      {"worker.renew_leases", "'{1,2}', '{" + token.substr(1, 36) + "," + token.substr(1, 36) + "}', 60000"},
  };
  auto conn = db.connect();
  pqxx::nontransaction n(conn);
  // Both plans a prepared statement may run: the first executions' custom plans, and the
  // generic plan PostgreSQL may settle on after five.
  for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
    n.exec(std::string("SET plan_cache_mode = ") + mode);
    for (const auto& [name, arguments] : statements) {
      const auto plan = explain_prepared(n, db.qualified(statement_sql(detail::inbox_statements(), name)), arguments);
      INFO(name << " under " << mode << ":\n" << plan);
      CHECK_THAT(plan, Catch::Contains("inbox_receipts_pkey"));
      CHECK_THAT(plan, !Catch::Contains("inbox_receipts_leases"));
      CHECK_THAT(plan, !Catch::Contains("Seq Scan on inbox_receipts"));
    }
  }
}

// The oldest-due claim (WorkerOptions::fair_claims = false) updates the receipts it
// picked. Joined to them, a generic plan, which cannot know how many $2 picks, guessed a
// share of the backlog and hash-joined it: a sequential scan of the inbox per claim. By
// an array of their ids the update probes the primary key under either plan, as the fair
// claim's does.
TEST_CASE("the oldest-due claim updates the receipts it picked by primary key under either plan") {
  TestDatabase db;
  db.execute(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint) "
      "SELECT 'tenant', 't1', 'test', 'orders.v1', 'm-' || i, 'thing.happened', 1, '{}', repeat('a', 64) "
      "FROM generate_series(1, 20000) AS i");
  db.execute("ANALYZE {schema}.inbox_receipts");
  auto conn = db.connect();
  pqxx::nontransaction n(conn);
  for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
    n.exec(std::string("SET plan_cache_mode = ") + mode);
    // The suspect lane's claim, joined too, takes LIMIT 1, which the generic plan knows.
    for (const auto& [name, arguments] : std::vector<std::pair<std::string, std::string>>{
             {"worker.claim", "'orders.v1', 32, 60000"}, {"worker.claim_suspect", "'orders.v1', 60000"}}) {
      const auto plan = explain_prepared(n, db.qualified(statement_sql(detail::inbox_statements(), name)), arguments);
      INFO(name << " under " << mode << ":\n" << plan);
      CHECK_THAT(plan, Catch::Contains("Index Scan using inbox_receipts_pkey on inbox_receipts r"));
      CHECK_THAT(plan, !Catch::Contains("Hash Join"));
      CHECK_THAT(plan, !Catch::Contains("Seq Scan on inbox_receipts"));
    }
  }
}

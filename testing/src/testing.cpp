// The test helpers: schema fixture (migrated, or copied from a template database), drain, redelivery, receipt state, captured events.
#include "boxcar/testing/testing.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <utility>

#include <pqxx/pqxx>

#include "boxcar/core/error.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "template_database.hpp"
#include "testing_queries.hpp"

namespace boxcar::testing {
namespace {

std::string url_from_environment() {
  for (const char* name : {"BOXCAR_TEST_DATABASE_URL", "BOXCAR_DATABASE_URL"})
    if (const char* value = std::getenv(name); value && *value) return value;
  throw ConfigError("BOXCAR_TEST_DATABASE_URL", "set it to a PostgreSQL the tests may create schemas in");
}

std::string fresh_schema_name() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string name = "test_";
  for (int i = 0; i < 12; ++i) name += "abcdefghijklmnopqrstuvwxyz0123456789"[rng() % 36];
  return name;
}

}  // namespace

TestSchema::TestSchema(std::string url) : TestSchema(std::move(url), TestSchemaOptions{}) {}

TestSchema::TestSchema(std::string url, TestSchemaOptions options)
    : url_(url.empty() ? url_from_environment() : std::move(url)), schema_(fresh_schema_name()) {
  if (options.from_template) {
    // The copy's database takes the schema's name: both are fresh, and unique on the server.
    server_url_ = url_;
    url_ = copy_template_database(server_url_, schema_);
  } else {
    migrate(url_, {.schema = schema_});
  }
}

TestSchema::~TestSchema() {
  pool_.reset();
  try {
    if (!server_url_.empty()) {
      drop_database(server_url_, schema_);
    } else {
      pqxx::connection c(url_);
      pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
    }
  } catch (...) {
    // A leftover schema or test database is harmless; a destructor must not throw.
  }
}

std::shared_ptr<ConnectionPool> TestSchema::pool(std::size_t size) {
  if (!pool_) pool_ = ConnectionPool::create({.url = url_, .size = size});
  return pool_;
}

std::string TestSchema::qualified(const std::string& sql) const { return detail::with_schema(sql, schema_); }

std::int64_t TestSchema::count(const std::string& sql) const {
  pqxx::connection c(url_);
  pqxx::nontransaction tx(c);
  return tx.exec1(qualified(sql))[0].as<std::int64_t>();
}

pqxx::result TestSchema::query(const std::string& sql) const {
  pqxx::connection c(url_);
  pqxx::nontransaction tx(c);
  return tx.exec(qualified(sql));
}

void TestSchema::execute(const std::string& sql) {
  Tx tx = pool()->begin();
  tx.exec(detail::with_schema(sql, schema_));
  tx.commit();
}

std::size_t drain(Worker& worker) { return worker.drain(); }

Receipt redeliver(Inbox& inbox, const AcceptRequest& request) { return inbox.accept(request); }

std::optional<ReceiptState> receipt_state(TestSchema& db, const AcceptRequest& request) {
  Tx tx = db.pool()->begin();
  const auto rows = tx.exec(detail::with_schema(testing_sql::kReceiptState, db.schema()), request.consumer,
                            request.source, to_string(request.scope.kind), request.scope.id, request.message_id);
  tx.commit();
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  const auto text = [&row](const char* column) {
    return row[column].is_null() ? std::string() : row[column].as<std::string>();
  };
  return ReceiptState{parse_receipt_status(row["status"].c_str()),
                      row["attempts"].as<int>(),
                      row["finished_attempts"].as<int>(),
                      text("last_error_type"),
                      text("last_error"),
                      text("dead_reason")};
}

std::vector<CapturedEvent> capture_published(TestSchema& db) {
  const std::string sql = detail::with_schema(testing_sql::kCapturePublished, db.schema());
  std::vector<std::pair<std::int64_t, CapturedEvent>> captured;  // row id: emit order
  // Each round marks the heads of the ordered keys; marking them makes the next event of
  // each key PENDING for the following round.
  for (;;) {
    Tx tx = db.pool()->begin();
    const auto rows = tx.exec(sql);
    tx.commit();
    if (rows.empty()) break;
    for (const auto& row : rows) {
      CapturedEvent e;
      e.event_id = row[0].as<std::string>();
      e.event_type = row[1].as<std::string>();
      e.schema_version = row[2].as<int>();
      e.topic = row[3].as<std::string>();
      e.key = row[4].as<std::string>();
      e.tenant_id = row[5].as<std::string>();
      e.causation_id = row[6].as<std::string>();
      e.correlation_id = row[7].as<std::string>();
      e.payload = nlohmann::json::parse(row[8].c_str());
      e.headers = nlohmann::json::parse(row[9].c_str()).get<std::map<std::string, std::string>>();
      captured.emplace_back(row[10].as<std::int64_t>(), std::move(e));
    }
  }
  std::sort(captured.begin(), captured.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CapturedEvent> events;
  events.reserve(captured.size());
  for (auto& [id, e] : captured) events.push_back(std::move(e));
  return events;
}

}  // namespace boxcar::testing

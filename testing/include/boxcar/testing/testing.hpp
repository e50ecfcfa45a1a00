// boxcar::testing — helpers for an application's own tests against a real PostgreSQL,
// in the shape the usage guide recommends: an isolated, migrated schema per test, drain() to run the
// worker until nothing is due, redelivery, a receipt's state, the events a test published
// (captured without Kafka), and row counts for application assertions.
//
//   boxcar::testing::TestSchema db;                        // BOXCAR_TEST_DATABASE_URL
//   // or, copied from a template database migrated once (TestSchemaOptions):
//   // boxcar::testing::TestSchema db("", {.from_template = true});
//   boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}});
//   inbox.accept(request);
//   boxcar::testing::drain(worker);
//   CHECK(boxcar::testing::receipt_state(db, request)->status == boxcar::ReceiptStatus::Completed);
//   CHECK(boxcar::testing::capture_published(db).size() == 1);
//
// More of the kit, each in its own header: eventually.hpp (wait for a condition),
// lambda_handler.hpp (a handler from a lambda), mock_kafka.hpp (librdkafka's mock cluster
// over TCP), tcp_proxy.hpp (lose a database connection at an exact protocol moment).
// Boxcar's own tests are built on these same helpers.
//
// Not for production code paths. Thread-safety: as the objects they wrap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/core/connection_pool.hpp"

namespace boxcar::testing {

/// How a TestSchema gets its migrated schema.
struct TestSchemaOptions {
  /// false (the default): the schema is created in the URL's database, beside the
  /// application's own tables there, and every migration is applied to it (about 0.4 s).
  ///
  /// true: the schema lives in a database of its own, made with `CREATE DATABASE ...
  /// TEMPLATE` from a template database that holds one migrated schema, and renamed to
  /// schema() (its functions' pinned search_path with it): the same tables, functions,
  /// partitions and schema_migrations rows as a migration makes, in about a third of its
  /// time (50 ms against 150 ms with the data folder on tmpfs). A copy creates about a
  /// thousand files, and dropping it deletes them: where the filesystem is slow at that,
  /// such as an ext4 without a journal under churn, it can cost more than a migration.
  /// The first such TestSchema against a server creates the template, under an advisory
  /// lock in the URL's database, and migrates it once; its name carries a checksum of the
  /// embedded migrations and the server's UTC day (the migrations create the outbox's
  /// partitions from the day they run), so a changed migration or a new day gets a new
  /// one, and templates two days old or more are dropped then. url() names the copy; the
  /// destructor drops it, ending any session still connected (DROP DATABASE ... WITH
  /// (FORCE)). The URL's role needs CREATEDB, and the application's objects in the URL's
  /// database are not in the copy: create them through execute(), as a test's own tables.
  bool from_template = false;
};

/// A schema of its own, migrated, dropped again when the object goes away.
class TestSchema {
 public:
  /// `url` empty: BOXCAR_TEST_DATABASE_URL, else BOXCAR_DATABASE_URL. The schema is
  /// created and migrated in the URL's database (TestSchemaOptions::from_template false).
  /// @throws ConfigError("BOXCAR_TEST_DATABASE_URL") when neither is set.
  explicit TestSchema(std::string url = {});
  /// The same, as `options` say.
  /// @throws ConfigError("BOXCAR_TEST_DATABASE_URL") when `url` is empty and neither is
  ///   set; DatabaseError when the template or the copy cannot be made (no CREATEDB, say);
  ///   MigrationError when the template's migration fails.
  TestSchema(std::string url, TestSchemaOptions options);
  ~TestSchema();
  TestSchema(const TestSchema&) = delete;
  TestSchema& operator=(const TestSchema&) = delete;

  /// The database the schema is in: the URL given, or with from_template the copy's.
  const std::string& url() const noexcept { return url_; }
  /// A fresh name (`test_` and 12 random lowercase letters and digits) for every object.
  const std::string& schema() const noexcept { return schema_; }
  /// A pool on the database (created on first use).
  std::shared_ptr<ConnectionPool> pool(std::size_t size = 8);

  /// Runs `sql`, with every `{schema}` replaced by this schema (quoted), and returns the
  /// first column of its single row as an integer: `count(*)` assertions. Uses a
  /// connection of its own, not the pool, so it works while the code under test holds
  /// every pooled connection. @throws pqxx::unexpected_rows unless exactly one row.
  std::int64_t count(const std::string& sql) const;
  /// Runs `sql` (with `{schema}` replaced) on a connection of its own, outside any
  /// transaction, and returns the rows: assertions on several columns, and set-up.
  pqxx::result query(const std::string& sql) const;
  /// Runs `sql` (with `{schema}` replaced) for set-up: CREATE TABLE, INSERT, UPDATE.
  void execute(const std::string& sql);
  /// `sql` with every `{schema}` replaced by this schema (quoted).
  std::string qualified(const std::string& sql) const;
  /// A new direct connection to the database, for assertions and fault injection (e.g.
  /// holding a lock the code under test must wait for).
  pqxx::connection connect() const { return pqxx::connection(url_); }

 private:
  std::string url_;
  std::string schema_;
  // With from_template: the URL given, on whose database the copy is dropped again.
  std::string server_url_;
  std::shared_ptr<ConnectionPool> pool_;
};

/// Runs `worker` on the calling thread until no receipt is due; returns how many it
/// claimed. Retries scheduled in the future are not due: use a zero backoff in tests
/// that want every attempt.
std::size_t drain(Worker& worker);

/// Accepts `request` again, as a transport redelivery would; the result says whether it
/// was recognised (Duplicate) — what a test asserts.
Receipt redeliver(Inbox& inbox, const AcceptRequest& request);

struct ReceiptState {
  ReceiptStatus status;
  int attempts;
  int finished_attempts;
  std::string last_error_type;
  std::string last_error;
  std::string dead_reason;
};

/// The stored state of the receipt with `request`'s identity; nullopt when none.
std::optional<ReceiptState> receipt_state(TestSchema& db, const AcceptRequest& request);

struct CapturedEvent {
  std::string event_id;
  std::string event_type;
  int schema_version = 0;
  std::string topic;
  std::string key;
  std::string tenant_id;
  std::string causation_id;
  std::string correlation_id;
  nlohmann::json payload;
  std::map<std::string, std::string> headers;
};

/// Publishes every committed, due outbox event to the test instead of Kafka: marks them
/// PUBLISHED and returns them in emit order. Events WAITING behind their key's head are
/// published too, one per key and round, as a publisher would (docs/publisher.md,
/// "Ordering"). Call it again to get only newer ones.
std::vector<CapturedEvent> capture_published(TestSchema& db);

}  // namespace boxcar::testing

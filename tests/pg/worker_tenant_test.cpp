// worker.tenant_setting and the row-level-security recipe of docs/security.md (section 4):
// a handler running for one tenant cannot read or change another tenant's rows, in
// single and batched mode, and one identity under two tenant scopes is two receipts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/core/error.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kConsumer = "ledger.v1";

// A plain LOGIN role (no superuser, not the table owner, so RLS applies to it) for the
// worker's connections, named after the test schema: roles are cluster-wide. The test
// cluster trusts loopback connections, so it needs no password.
class AppRole {
 public:
  explicit AppRole(TestDatabase& db) : db_(db), name_(db.schema() + "_app") {
    db_.execute("CREATE ROLE " + name_ + " LOGIN");
    db_.execute("GRANT USAGE ON SCHEMA {schema} TO " + name_);
    db_.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO " + name_);
    db_.execute("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO " + name_);
    db_.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO " + name_);
  }
  ~AppRole() {
    try {
      db_.execute("DROP OWNED BY " + name_);
      db_.execute("DROP ROLE " + name_);
    } catch (...) {
    }
  }
  AppRole(const AppRole&) = delete;
  AppRole& operator=(const AppRole&) = delete;

  /// The test database's URL, connecting as this role.
  std::string url() const {
    const std::string& url = db_.url();
    if (url.find("://") == std::string::npos) return url + " user=" + name_;
    return url + (url.find('?') == std::string::npos ? "?" : "&") + "user=" + name_;
  }

 private:
  TestDatabase& db_;
  std::string name_;
};

// The application table of the recipe: one row per tenant and account, with the policy
// every application table of a tenant-isolated deployment carries.
void create_ledger(TestDatabase& db) {
  db.execute("CREATE TABLE {schema}.ledger (tenant_id text NOT NULL, account text NOT NULL, balance int NOT NULL)");
  db.execute("ALTER TABLE {schema}.ledger ENABLE ROW LEVEL SECURITY");
  db.execute(
      "CREATE POLICY tenant_isolation ON {schema}.ledger "
      "USING (tenant_id = current_setting('app.tenant_id'))");
  db.execute(
      "INSERT INTO {schema}.ledger VALUES ('tenant-a', 'a-1', 100), ('tenant-b', 'b-1', 200), "
      "('tenant-b', 'b-2', 300)");
}

AcceptRequest ledger_message(const std::string& tenant, const std::string& id) {
  return {.scope = tenant.empty() ? Scope::global() : Scope::tenant(tenant),
          .source = "ledger-service",
          .consumer = kConsumer,
          .message_id = id,
          .event_type = "ledger.touched",
          .schema_version = 1,
          .payload = {{"id", id}}};
}

// What one handler call could see and change.
struct Observation {
  std::string tenant;              // the scope's id
  std::string setting;             // current_setting('app.tenant_id') inside context.tx
  std::int64_t visible = 0;        // rows of the whole table it can read
  std::int64_t visible_other = 0;  // rows of any other tenant it can read by naming them
  std::int64_t updated_other = 0;  // rows of other tenants its UPDATE reached
  std::int64_t updated_own = 0;    // rows of its own tenant its UPDATE reached
};

class LedgerHandler {
 public:
  explicit LedgerHandler(std::string table) : table_(std::move(table)) {}

  std::shared_ptr<InboxHandler> handler() {
    return boxcar::testing::handler([this](const nlohmann::json&, HandlerContext& c) {
      Observation o;
      o.tenant = c.scope.id;
      o.setting = c.tx.exec("SELECT current_setting('app.tenant_id')")[0][0].as<std::string>();
      o.visible = c.tx.exec("SELECT count(*) FROM " + table_)[0][0].as<std::int64_t>();
      o.visible_other =
          c.tx.exec("SELECT count(*) FROM " + table_ + " WHERE tenant_id <> $1", c.scope.id)[0][0].as<std::int64_t>();
      o.updated_other = c.tx.exec("UPDATE " + table_ + " SET balance = balance + 1 WHERE tenant_id <> $1", c.scope.id)
                            .affected_rows();
      o.updated_own =
          c.tx.exec("UPDATE " + table_ + " SET balance = balance + 1 WHERE tenant_id = $1", c.scope.id).affected_rows();
      std::lock_guard lock(mutex_);
      seen_.push_back(std::move(o));
    });
  }

  std::vector<Observation> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  std::string table_;
  std::mutex mutex_;
  std::vector<Observation> seen_;
};

Observation of(const std::vector<Observation>& seen, const std::string& tenant) {
  for (const auto& o : seen)
    if (o.tenant == tenant) return o;
  FAIL("no handler call for tenant '" << tenant << "'");
  return {};
}

}  // namespace

TEST_CASE(
    "with worker.tenant_setting and a policy on it, a handler for tenant A cannot read or update tenant B's rows") {
  const std::size_t batch_size = GENERATE(1, 10);
  CAPTURE(batch_size);
  TestDatabase db;
  create_ledger(db);
  const AppRole role(db);
  auto pool = ConnectionPool::create({.url = role.url(), .size = 4});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  std::vector<AcceptRequest> batch = {ledger_message("tenant-a", "m-1"), ledger_message("tenant-b", "m-2"),
                                      ledger_message("", "m-3")};
  inbox.accept_many(batch);

  LedgerHandler ledger(db.qualified("{schema}.ledger"));
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 2,
                 .batch_size = batch_size,
                 .lease = 10s,
                 .handler_timeout = 5s,
                 .tenant_setting = "app.tenant_id"},
                {{.consumer = kConsumer, .supports = {{"ledger.touched", 1}}, .handler = ledger.handler()}});
  worker.drain();
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 3);

  const auto seen = ledger.seen();
  REQUIRE(seen.size() == 3);
  const auto a = of(seen, "tenant-a");
  CHECK(a.setting == "tenant-a");
  CHECK(a.visible == 1);
  CHECK(a.visible_other == 0);
  CHECK(a.updated_other == 0);
  CHECK(a.updated_own == 1);
  const auto b = of(seen, "tenant-b");
  CHECK(b.setting == "tenant-b");
  CHECK(b.visible == 2);
  CHECK(b.visible_other == 0);
  CHECK(b.updated_other == 0);
  CHECK(b.updated_own == 2);
  // A global message sets '' (no tenant): the policy matches no tenant's rows.
  const auto global = of(seen, "");
  CHECK(global.setting.empty());
  CHECK(global.visible == 0);
  CHECK(global.updated_other == 0);

  // Counted as the owner (who bypasses the policy): each tenant's rows moved only by
  // its own message.
  CHECK(db.scalar("SELECT balance FROM {schema}.ledger WHERE account = 'a-1'") == 101);
  CHECK(db.scalar("SELECT sum(balance) FROM {schema}.ledger WHERE tenant_id = 'tenant-b'") == 502);

  // SET LOCAL: the setting ends with the handler's transaction; the pooled session that
  // ran it does not carry the last tenant into the next transaction.
  Tx tx = pool->begin();
  CHECK(tx.exec("SELECT coalesce(current_setting('app.tenant_id', true), '')")[0][0].as<std::string>().empty());
}

TEST_CASE("without worker.tenant_setting a handler cannot read a table whose policy needs it") {
  TestDatabase db;
  create_ledger(db);
  const AppRole role(db);
  auto pool = ConnectionPool::create({.url = role.url(), .size = 4});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  inbox.accept(ledger_message("tenant-a", "m-1"));
  LedgerHandler ledger(db.qualified("{schema}.ledger"));
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 .lease = 10s,
                 .handler_timeout = 5s,
                 .max_attempts = 1},
                {{.consumer = kConsumer, .supports = {{"ledger.touched", 1}}, .handler = ledger.handler()}});
  worker.drain();
  // current_setting('app.tenant_id') fails: fail closed, the receipt is DEAD, nothing read.
  CHECK(ledger.seen().empty());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 1);
  CHECK(db.scalar("SELECT sum(balance) FROM {schema}.ledger") == 600);
}

TEST_CASE("worker.tenant_setting must name a custom setting") {
  TestDatabase db;
  auto pool = db.pool(4);
  for (const std::string bad : {"tenant_id", "app.", ".x", "app.tenant id", "app;drop.x", "1app.x"}) {
    CAPTURE(bad);
    try {
      Worker worker(pool, {.schema = db.schema(), .consumers = {kConsumer}, .tenant_setting = bad},
                    {{.consumer = kConsumer,
                      .supports = {{"ledger.touched", 1}},
                      .handler = handler([](const nlohmann::json&, HandlerContext&) {})}});
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(e.key() == "worker.tenant_setting");
    }
  }
  CHECK(is_custom_setting_name("app.tenant_id"));
  CHECK(is_custom_setting_name("my_app.scope.tenant"));
}

TEST_CASE("one identity under two tenant scopes is two receipts, each processed once") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(4);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  // Same source, consumer, message id and content: only the scope differs.
  const auto a = ledger_message("tenant-a", "m-1");
  const auto b = ledger_message("tenant-b", "m-1");
  const Receipt first = inbox.accept(a);
  const Receipt second = inbox.accept(b);
  CHECK(first.kind == Receipt::Kind::Accepted);
  CHECK(second.kind == Receipt::Kind::Accepted);
  CHECK(first.id != second.id);

  const std::string table = db.qualified("{schema}.app_rows");
  std::mutex mutex;
  std::vector<std::string> tenants;
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 2,
                 .lease = 10s,
                 .handler_timeout = 5s,
                 .tenant_setting = "app.tenant_id"},
                {{.consumer = kConsumer,
                  .supports = {{"ledger.touched", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    std::lock_guard lock(mutex);
                    tenants.push_back(c.tx.exec("SELECT current_setting('app.tenant_id')")[0][0].as<std::string>());
                  })}});
  worker.drain();
  // Redeliveries after completion are duplicates of their own tenant's receipt.
  CHECK(redeliver(inbox, a).id == first.id);
  CHECK(redeliver(inbox, b).id == second.id);
  CHECK(redeliver(inbox, a).kind == Receipt::Kind::Duplicate);
  worker.drain();

  std::sort(tenants.begin(), tenants.end());
  CHECK(tenants == std::vector<std::string>{"tenant-a", "tenant-b"});
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-1'") == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 2);
}

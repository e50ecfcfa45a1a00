// Tenant-fair claiming (docs/worker.md, "Claims"): the default claim shares each claim
// out over the consumer's scopes in round robin, so a tenant whose backlog is older than
// everyone else's, or whose every message fails, cannot keep the other tenants waiting;
// a lone tenant still gets whole claims, and several workers still claim each receipt
// once. The unfair claim (fair_claims = false) is checked to starve, so the fair checks
// measure something.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "boxcar/inbox/detail/named_statements.hpp"
#include "boxcar/inbox/worker.hpp"
#include "notice_log.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kConsumer = "fair.v1";
constexpr std::size_t kClaimLimit = 8;

// The scope id of every handler call, in call order ("" for the global scope).
class CallLog {
 public:
  void add(const std::string& scope_id) {
    std::lock_guard lock(mutex_);
    calls_.push_back(scope_id);
  }
  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool;
  std::string app_table;
  CallLog log;
  Setup() : pool(db.pool(10)), app_table(db.qualified("{schema}.app_rows")) { create_app_table(db); }

  // `count` messages of one scope (a tenant, or the global scope for ""), ids
  // "<prefix>-<n>".
  void accept(const std::string& tenant, int count) const {
    Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}});
    std::vector<AcceptRequest> batch;
    for (int i = 0; i < count; ++i) {
      auto request = message(kConsumer, (tenant.empty() ? "global" : tenant) + "-" + std::to_string(i));
      request.scope = tenant.empty() ? Scope::global() : Scope::tenant(tenant);
      batch.push_back(std::move(request));
    }
    for (const auto& outcome : inbox.accept_many(batch)) outcome.rethrow_if_error();
  }
  // The tenant's receipts became due an hour ago: older than every other tenant's.
  void age(const std::string& tenant) {
    db.execute("UPDATE {schema}.inbox_receipts SET available_at = now() - interval '1 hour' WHERE scope_id = '" +
               tenant + "'");
  }

  WorkerOptions options(bool fair) const {
    return {.schema = db.schema(),
            .consumers = {kConsumer},
            .concurrency = 1,
            .claim_limit = kClaimLimit,
            .fair_claims = fair,
            .lease = 10s,
            .handler_timeout = 5s,
            .max_attempts = 3,
            .backoff = {.base = 60s, .cap = 60s},
            .poll_interval = 100ms};
  }
  // Writes the app row and logs the call; every message of `poison` fails.
  HandlerRegistration handler(const std::string& poison = "x-none") {
    return {.consumer = kConsumer,
            .supports = {{"thing.happened", 1}},
            .handler = testing::handler([this, poison](const nlohmann::json&, HandlerContext& c) {
              log.add(c.scope.id);
              if (c.scope.id == poison) throw std::runtime_error("poison tenant");
              insert_app_row(app_table, c);
            })};
  }
  long long completed_of_others(const std::string& tenant) const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND scope_id <> '" +
                     tenant + "'");
  }
};

// 20 small tenants with 3 messages each and one global message, accepted after `hot`'s
// older backlog of 300.
void hot_and_small(Setup& s, const std::string& hot) {
  s.accept(hot, 300);
  s.age(hot);
  for (int t = 0; t < 20; ++t) s.accept("small-" + std::to_string(t), 3);
  s.accept("", 1);
}

// The plan of the fair claim's statement as the worker runs it: inside
// inbox_claim_fair() (migrations/0026_inbox_claim_fair_generic_plan.sql), which pins
// plan_cache_mode = force_generic_plan, so the session's `plan_cache_mode` must not
// matter. Read through auto_explain from a claim that is rolled back.
std::string fair_claim_plan(TestDatabase& db, const std::string& plan_cache_mode) {
  std::string sql;
  for (const auto& statement : detail::inbox_statements())
    if (std::string(statement.name) == "worker.claim_fair") sql = db.qualified(std::string(statement.sql));
  REQUIRE(!sql.empty());
  auto connection = db.connect();
  NoticeLog log(connection);
  explain_nested_statements(connection);
  pqxx::nontransaction n(connection);
  n.exec("SET plan_cache_mode = " + plan_cache_mode);
  n.exec("PREPARE fair(text, bigint, bigint, text, text) AS " + sql);
  n.exec("BEGIN");
  n.exec("EXECUTE fair('" + std::string(kConsumer) + "', 32, 60000, '', '')");
  n.exec("ROLLBACK");
  return log.plan_of("WITH RECURSIVE after_cursor");
}

// The distinct scopes among the first `n` handler calls.
std::set<std::string> scopes_of_first(const std::vector<std::string>& calls, std::size_t n) {
  return {calls.begin(), calls.begin() + static_cast<long>(std::min(n, calls.size()))};
}

}  // namespace

TEST_CASE("a hot tenant's backlog older than every other tenant's does not keep the others out of the first claims") {
  Setup s;
  hot_and_small(s, "hot");
  Worker worker(s.pool, s.options(true), {s.handler()});
  REQUIRE(worker.drain() == 361);

  // 22 scopes, 8 per claim, one each: three claims (24 calls) visit every one of them.
  const auto calls = s.log.calls();
  const auto first = scopes_of_first(calls, 3 * kClaimLimit);
  CHECK(first.size() == 22);
  CHECK(first.contains("hot"));
  CHECK(first.contains(""));
  // Every small tenant's messages are done within the first 9 claims (each has 3, and
  // every claim gives each scope it visits an equal share).
  const auto last_small = std::find_if(calls.rbegin(), calls.rend(), [](const auto& id) { return id != "hot"; });
  CHECK(calls.rend() - last_small <= static_cast<long>(9 * kClaimLimit));
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 361);
}

TEST_CASE("the unfair claim gives the first claims to the tenant with the oldest backlog") {
  Setup s;
  hot_and_small(s, "hot");
  Worker worker(s.pool, s.options(false), {s.handler()});
  REQUIRE(worker.drain() == 361);

  const auto calls = s.log.calls();
  CHECK(scopes_of_first(calls, 3 * kClaimLimit) == std::set<std::string>{"hot"});
  CHECK(scopes_of_first(calls, 300).size() == 1);
}

TEST_CASE("a poison tenant whose every message fails does not starve the other tenants") {
  Setup s;
  s.accept("poison", 200);
  s.age("poison");
  for (int t = 0; t < 10; ++t) s.accept("small-" + std::to_string(t), 5);
  Worker worker(s.pool, s.options(true), {s.handler("poison")});
  worker.drain();

  CHECK(s.completed_of_others("poison") == 50);
  // Calls for the poison tenant before the others' last one: one share per claim that
  // visited it (under the unfair claim: all 200 of its failing first attempts).
  const auto calls = s.log.calls();
  const auto last_other =
      std::find_if(calls.rbegin(), calls.rend(), [](const auto& id) { return id != "poison"; }).base();
  const auto poison_before = std::count(calls.begin(), last_other, std::string("poison"));
  INFO("poison calls before the last other tenant's: " << poison_before);
  CHECK(poison_before <= 20);
}

TEST_CASE("a fair claim takes its whole limit whenever that many receipts are due") {
  Setup s;
  // One tenant alone gets whole claims; a tenant with less than its share leaves the
  // rest of the claim to the oldest due (another tenant's), not a short claim.
  s.accept("big", 100);
  s.accept("tiny", 1);
  Worker worker(s.pool, s.options(true), {s.handler()});
  REQUIRE(worker.drain() == 101);
  // 101 receipts, 8 per claim: 12 full claims, one of 5, and the empty one that ends drain().
  CHECK(worker.stats().claim_statements == 14);
}

TEST_CASE("a fair claim never takes more than its limit when the shares round up past it") {
  Setup s;
  // 3 scopes share a limit of 8 as 3 + 3 + 2, not 3 x 3: 8, 8, then the last 2, then
  // the empty claim that ends drain(). Claiming 9 would end it a claim earlier.
  for (int t = 0; t < 3; ++t) s.accept("t-" + std::to_string(t), 6);
  Worker worker(s.pool, s.options(true), {s.handler()});
  REQUIRE(worker.drain() == 18);
  CHECK(worker.stats().claim_statements == 4);
}

TEST_CASE("several workers claiming fairly handle each receipt once") {
  Setup s;
  for (int t = 0; t < 30; ++t) s.accept("t-" + std::to_string(t), 20);
  s.accept("", 20);
  auto options = s.options(true);
  options.concurrency = 2;
  Worker a(s.pool, options, {s.handler()});
  Worker b(s.pool, options, {s.handler()});
  a.start();
  b.start();
  REQUIRE(eventually([&] { return s.completed_of_others("x-none") == 620; }, 60s));
  a.stop();
  b.stop();
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 620);
  CHECK(s.db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 620);
  CHECK(s.log.calls().size() == 620);
}

TEST_CASE("the fair claim's plan reads the scope index and the primary key, never the whole table") {
  Setup s;
  // Statistics that saw one scope only (a hot tenant's backlog analysed before the others
  // arrived): the planner must still pick each scope's rows from the scope index, not walk
  // the claimable index past the hot tenant's rows. With 100,000 of them, older than the
  // others, the shares once did that for each small scope, 0.4 s per claim: the slow mode
  // of bench_fairness, which lasted until autovacuum analysed the table again
  // (docs/schema.md, "The fair claim's plan").
  s.db.execute(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, created_at, available_at) "
      "SELECT 'tenant', 'hot', 'test', '" +
      std::string(kConsumer) +
      "', 'hot-' || i, 'thing.happened', 1, '{}', repeat('a', 64), now() - interval '1 minute', "
      "now() - interval '1 minute' FROM generate_series(1, 100000) AS i");
  s.db.execute("ANALYZE {schema}.inbox_receipts");
  for (int t = 0; t < 50; ++t) s.accept("small-" + std::to_string(t), 2);
  for (const std::string mode : {"force_custom_plan", "force_generic_plan"}) {
    const auto plan = fair_claim_plan(s.db, mode);
    INFO(mode << "\n" << plan);
    // The generic plan whatever the session asked for: the consumer is a parameter in it,
    // where a custom plan would show the value.
    CHECK(plan.find("consumer = $1") != std::string::npos);
    CHECK(plan.find("inbox_receipts_claimable_scope") != std::string::npos);
    CHECK(plan.find("inbox_receipts_pkey") != std::string::npos);
    CHECK(plan.find("Seq Scan") == std::string::npos);
    // A scope filtered out of another index's rows instead of an index condition.
    std::size_t at = 0;
    while ((at = plan.find("Filter:", at)) != std::string::npos) {
      const auto line = plan.substr(at, plan.find('\n', at) - at);
      CHECK(line.find("scope_id") == std::string::npos);
      ++at;
    }
  }
}

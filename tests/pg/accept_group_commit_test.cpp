// Group commit of concurrent accept() calls (InboxOptions::group_commit): calls queued
// behind a flush in flight share one transaction, each still gets its own receipt or its
// own error, a lone call runs at once, and a lost reply to a shared commit makes every
// call of the group uncertain. A flush is held in flight deterministically by an
// uncommitted insert of the same identity on another connection (a row lock the first
// accept() waits on), so that the calls behind it queue.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "exposition.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::eventually;
using boxcar::testing::TcpProxy;
using boxcar::testing::TestDatabase;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "c.v1";

AcceptRequest request(const std::string& id, int n = 1) {
  return {.scope = Scope::global(),
          .source = "webhook",
          .consumer = kConsumer,
          .message_id = id,
          .event_type = "thing.happened",
          .schema_version = 1,
          .payload = {{"n", n}}};
}

// What one accept() call ended with.
struct Outcome {
  std::optional<Receipt> receipt{};
  std::string code{};  // the error's code, empty on success
  bool uncertain = false;
};

Outcome attempt(Inbox& inbox, const AcceptRequest& r) {
  try {
    return {.receipt = inbox.accept(r)};
  } catch (const InboxStorageError& e) {
    return {.code = e.code(), .uncertain = e.uncertain()};
  } catch (const Error& e) {
    return {.code = e.code()};
  }
}

std::future<Outcome> attempt_async(Inbox& inbox, AcceptRequest r) {
  return std::async(std::launch::async, [&inbox, r = std::move(r)] { return attempt(inbox, r); });
}

int port_of(const std::string& url) {
  std::smatch m;
  REQUIRE(std::regex_search(url, m, std::regex(R"(:(\d+)/)")));
  return std::stoi(m[1]);
}

// Keeps every accept() flush slot (kGroupCommitFlushes) in flight until released: for
// each slot an uncommitted insert of an identity "gate-N", on a direct connection of its
// own, makes accept("gate-N") wait on its row lock. Releasing one gate frees one slot,
// which passes to the longest-waiting queued call.
class HeldFlushes {
 public:
  HeldFlushes(TestDatabase& db, Inbox& inbox) {
    const std::string waiting_on_lock =
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pg_catalog.strpos(query, '" +
        db.schema() + "') > 0";
    for (std::size_t g = 0; g < kGroupCommitFlushes; ++g) {
      const std::string id = "gate-" + std::to_string(g);
      auto gate = std::make_unique<Gate>(db.url());
      gate->blocking = std::make_unique<pqxx::work>(gate->connection);
      gate->blocking->exec(
          db.qualified("INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
                       "schema_version, payload, fingerprint) VALUES ('global', 'webhook', 'c.v1', '" +
                       id + "', 'thing.happened', 1, '{\"n\":1}', repeat('0', 64))"));
      gate->call = attempt_async(inbox, request(id));
      // One at a time, so that each gate's call holds a slot of its own.
      REQUIRE(eventually([&] { return db.count(waiting_on_lock) == static_cast<std::int64_t>(g + 1); }));
      gates_.push_back(std::move(gate));
    }
  }

  bool still_held(std::size_t g) { return gates_[g]->call.wait_for(0s) == std::future_status::timeout; }

  // Rolls gate g's blocking insert back: the gate's own insert then lands, its flush ends.
  Outcome release(std::size_t g) {
    gates_[g]->blocking->abort();
    return gates_[g]->call.get();
  }

  // Releases every gate still held; true when each gate's call was accepted.
  bool release_rest() {
    bool all = true;
    for (std::size_t g = 0; g < gates_.size(); ++g)
      if (gates_[g]->call.valid()) all = release(g).receipt.has_value() && all;
    return all;
  }

 private:
  struct Gate {
    explicit Gate(const std::string& url) : connection(url) {}
    pqxx::connection connection;
    std::unique_ptr<pqxx::work> blocking{};
    std::future<Outcome> call{};
  };
  std::vector<std::unique_ptr<Gate>> gates_;
};

bool accepted(const Outcome& o) { return o.receipt && o.receipt->kind == Receipt::Kind::Accepted; }
bool duplicate(const Outcome& o) { return o.receipt && o.receipt->kind == Receipt::Kind::Duplicate; }

}  // namespace

TEST_CASE("sixteen threads accepting concurrently get one receipt each, of the right kind, counted once") {
  TestDatabase db;
  auto metrics = std::make_shared<Metrics>();
  auto pool = db.pool(16);
  Inbox inbox(
      pool,
      {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true, .metrics = metrics});
  for (int k = 0; k < 10; ++k) inbox.accept(request("retained-" + std::to_string(k)));

  constexpr int kThreads = 16;
  constexpr int kOwn = 30;     // new identities per thread
  constexpr int kShared = 10;  // identities every thread sends
  std::atomic<int> own_accepted{0}, shared_accepted{0}, shared_duplicate{0}, retained_duplicate{0}, conflicts{0},
      wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kOwn; ++k) {
        const std::string suffix = std::to_string(k);
        ++(accepted(attempt(inbox, request("own-" + std::to_string(t) + "-" + suffix))) ? own_accepted : wrong);
        if (k < kShared) {
          const Outcome shared = attempt(inbox, request("shared-" + suffix));
          ++(accepted(shared) ? shared_accepted : duplicate(shared) ? shared_duplicate : wrong);
          ++(duplicate(attempt(inbox, request("retained-" + suffix))) ? retained_duplicate : wrong);
          // Same identity as a retained message, other content: a conflict for this call only.
          ++(attempt(inbox, request("retained-" + suffix, 2)).code == "IDENTITY_CONFLICT" ? conflicts : wrong);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  CHECK(wrong == 0);
  CHECK(own_accepted == kThreads * kOwn);
  CHECK(shared_accepted == kShared);  // exactly one caller per shared identity
  CHECK(shared_duplicate == (kThreads - 1) * kShared);
  CHECK(retained_duplicate == kThreads * kShared);
  CHECK(conflicts == kThreads * kShared);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 10 + kThreads * kOwn + kShared);

  const GroupCommitStats stats = inbox.group_commit_stats();
  const int calls = 10 + kThreads * (kOwn + 3 * kShared);
  CHECK(stats.alone_calls + stats.grouped_calls == static_cast<std::uint64_t>(calls));
  CHECK(stats.groups > 0);  // 16 threads on a few cores: calls do queue behind a flush
  CHECK(stats.waiting == 0);
  // Queued calls hold no connection: only the flushes in flight hold one each.
  CHECK(pool->open_connections() <= kGroupCommitFlushes);

  // Every call counted exactly once, whether it ran alone or in a group.
  const std::string text = metrics->serialize();
  const auto counted = [&](const std::string& result) {
    return boxcar::testing::metric_value(text, "boxcar_inbox_accept_total",
                                         {{"consumer", kConsumer}, {"result", result}});
  };
  CHECK(counted("accepted") == 10 + kThreads * kOwn + kShared);
  CHECK(counted("duplicate") == (kThreads - 1) * kShared + kThreads * kShared);
  CHECK(counted("conflict") == kThreads * kShared);
}

TEST_CASE("calls queued behind the flushes in flight share one transaction and a conflict fails only its own caller") {
  TestDatabase db;
  Inbox inbox(db.pool(4), {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true});
  const Receipt retained = inbox.accept(request("retained"));
  inbox.accept(request("retained-2"));
  REQUIRE(inbox.group_commit_stats().alone_calls == 2);

  HeldFlushes held(db, inbox);
  std::vector<std::future<Outcome>> queued;
  for (int k = 0; k < 4; ++k) queued.push_back(attempt_async(inbox, request("new-" + std::to_string(k))));
  queued.push_back(attempt_async(inbox, request("retained")));       // duplicate
  queued.push_back(attempt_async(inbox, request("retained-2", 2)));  // conflict
  REQUIRE(eventually([&] { return inbox.group_commit_stats().waiting == 6; }));
  CHECK(held.still_held(0));

  // One slot frees: the six queued calls go through it together.
  CHECK(accepted(held.release(0)));
  std::vector<Outcome> outcomes;
  for (auto& f : queued) outcomes.push_back(f.get());
  for (std::size_t k = 0; k < 4; ++k) {
    INFO("new-" << k << " " << outcomes[k].code);
    CHECK(accepted(outcomes[k]));
  }
  REQUIRE(duplicate(outcomes[4]));
  CHECK(outcomes[4].receipt->id == retained.id);
  CHECK(outcomes[5].code == "IDENTITY_CONFLICT");
  CHECK(held.release_rest());

  // The six queued calls were one shared transaction.
  const GroupCommitStats stats = inbox.group_commit_stats();
  CHECK(stats.groups == 1);
  CHECK(stats.grouped_calls == 6);
  CHECK(stats.largest_group == 6);
  CHECK(stats.alone_calls == 2 + kGroupCommitFlushes);  // the retained two first, then the gates
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 6 + static_cast<std::int64_t>(kGroupCommitFlushes));
}

TEST_CASE("two queued calls of one identity never share a group: the first is accepted, the second a duplicate") {
  TestDatabase db;
  Inbox inbox(db.pool(4), {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true});
  HeldFlushes held(db, inbox);
  auto first = attempt_async(inbox, request("twice"));
  REQUIRE(eventually([&] { return inbox.group_commit_stats().waiting == 1; }));
  auto second = attempt_async(inbox, request("twice"));
  auto other = attempt_async(inbox, request("other"));
  REQUIRE(eventually([&] { return inbox.group_commit_stats().waiting == 3; }));

  CHECK(accepted(held.release(0)));
  const Outcome a = first.get(), b = second.get(), c = other.get();
  CHECK(accepted(a));
  REQUIRE(duplicate(b));
  CHECK(b.receipt->id == a.receipt->id);
  CHECK(accepted(c));
  CHECK(held.release_rest());
  const GroupCommitStats stats = inbox.group_commit_stats();
  CHECK(stats.groups == 1);  // the first "twice" with "other", then the second "twice" alone
  CHECK(stats.grouped_calls == 2);
  CHECK(stats.alone_calls == kGroupCommitFlushes + 1);
}

TEST_CASE("an invalid call fails at once and alone even while every flush slot is taken") {
  TestDatabase db;
  auto metrics = std::make_shared<Metrics>();
  Inbox inbox(
      db.pool(4),
      {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true, .metrics = metrics});
  HeldFlushes held(db, inbox);
  auto a = attempt_async(inbox, request("a"));
  auto b = attempt_async(inbox, request("b"));
  REQUIRE(eventually([&] { return inbox.group_commit_stats().waiting == 2; }));

  AcceptRequest invalid = request("bad");
  invalid.consumer = "undeclared.v1";
  const Outcome refused = attempt(inbox, invalid);  // returns while the flushes are still held
  CHECK(refused.code == "INBOX_UNKNOWN_CONSUMER");
  CHECK(held.still_held(0));
  CHECK(inbox.group_commit_stats().waiting == 2);

  CHECK(accepted(held.release(0)));
  CHECK(accepted(a.get()));
  CHECK(accepted(b.get()));
  CHECK(held.release_rest());
  CHECK(inbox.group_commit_stats().grouped_calls == 2);
  CHECK(boxcar::testing::metric_value(metrics->serialize(), "boxcar_inbox_accept_total",
                                      {{"consumer", "undeclared"}, {"result", "invalid"}}) == 1);
}

TEST_CASE("a lone call with nothing in flight runs at once on its own") {
  TestDatabase db;
  Inbox inbox(db.pool(4), {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true});
  auto lone = attempt_async(inbox, request("lone"));
  REQUIRE(lone.wait_for(10s) == std::future_status::ready);  // liveness only
  CHECK(accepted(lone.get()));
  const GroupCommitStats stats = inbox.group_commit_stats();
  CHECK(stats.alone_calls == 1);
  CHECK(stats.groups == 0);
  CHECK(stats.waiting == 0);
}

TEST_CASE(
    "a lost reply to a group's shared autocommit insert makes every call of the group uncertain and each redelivery "
    "yields exactly one receipt") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = kGroupCommitFlushes});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = true});

  HeldFlushes held(db, inbox);  // the gates' inserts are autocommit: they send no COMMIT
  constexpr int kQueued = 5;
  std::vector<std::future<Outcome>> queued;
  for (int k = 0; k < kQueued; ++k) queued.push_back(attempt_async(inbox, request("m-" + std::to_string(k))));
  REQUIRE(eventually([&] { return inbox.group_commit_stats().waiting == kQueued; }));

  // A group that fits one statement runs it in autocommit: its commit is that statement's.
  proxy.drop_response_to_statement("boxcar.inbox.insert_many." + db.schema());
  CHECK(accepted(held.release(0)));
  for (auto& f : queued) {
    const Outcome o = f.get();
    CHECK(!o.receipt);
    CHECK(o.code == "STORAGE_UNCERTAIN");
    CHECK(o.uncertain);
  }
  CHECK(proxy.faults() == 1);
  CHECK(held.release_rest());
  CHECK(inbox.group_commit_stats().groups == 1);
  // The shared insert committed: every identity is retained once.
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id LIKE 'm-%'") == kQueued);

  // Each caller redelivers: the inbox deduplicates.
  for (int k = 0; k < kQueued; ++k) {
    const Outcome again = attempt(inbox, request("m-" + std::to_string(k)));
    CHECK(duplicate(again));
  }
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id LIKE 'm-%'") == kQueued);
}

TEST_CASE("with group commit off a call does not wait for the calls in flight") {
  TestDatabase db;
  Inbox inbox(db.pool(4), {.schema = db.schema(), .consumers = {kConsumer}, .notify = false, .group_commit = false});
  HeldFlushes held(db, inbox);
  auto free_call = attempt_async(inbox, request("free"));
  // It commits on a connection of its own while the gates' inserts still wait.
  REQUIRE(free_call.wait_for(10s) == std::future_status::ready);
  CHECK(accepted(free_call.get()));
  CHECK(held.still_held(0));
  CHECK(held.release_rest());
  const GroupCommitStats stats = inbox.group_commit_stats();
  CHECK(stats.alone_calls == 0);
  CHECK(stats.groups == 0);
}

// Integration tests of the Redis Streams ingress against a real, throw-away redis-server
// and a fresh inbox schema: what is acknowledged, what stays pending, what is
// dead-lettered, and what a restarted consumer takes back.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "boxcar/core/migrate.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "redis_server.hpp"
#include "stream_ingress.hpp"
#include "boxcar/testing/testing.hpp"

extern char** environ;

using namespace redis_streams;
using namespace std::chrono_literals;

namespace {

constexpr const char* kConsumer = "orders.projection.v1";
// The tenant's own stream: the key, which only tenant-7's ACL user may write, is the tenant.
constexpr const char* kStream = "orders:tenant-7";
constexpr const char* kDeadLetters = "orders:tenant-7:dead";

/// ctest's SKIP_RETURN_CODE for this suite (CMakeLists.txt).
constexpr int kSkipped = 77;

/// The server; when redis-server is not installed the process ends with kSkipped, which
/// ctest reports as skipped: a test that could not run never counts as passed.
std::unique_ptr<testing::RedisServer> start_redis_or_skip() {
  const std::string executable = testing::RedisServer::find_executable();
  if (executable.empty()) {
    std::cout << "SKIPPED: redis-server is not installed (apt-get install redis-server); the Redis Streams "
                 "example is not tested"
              << std::endl;
    std::exit(kSkipped);
  }
  return std::make_unique<testing::RedisServer>(executable);
}

RedisOptions redis_options(const testing::RedisServer& server) { return {.host = "127.0.0.1", .port = server.port()}; }

IngressOptions ingress_options(const std::string& consumer_name = "ingress-a") {
  return {.stream = kStream,
          .group = "boxcar",
          .consumer_name = consumer_name,
          .batch_size = 3,
          .block = 100ms,
          .backoff = {.base = 10ms, .cap = 50ms}};
}

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields order(const std::string& id, const std::string& data, const std::string& type = "order.created") {
  Fields fields = {{"id", id}};
  if (!type.empty()) fields.emplace_back("type", type);
  fields.insert(fields.end(), {{"version", "1"}, {"data", data}});
  return fields;
}

std::string xadd(RedisClient& redis, const Fields& fields, const std::string& stream = kStream) {
  std::vector<std::string> args = {"XADD", stream, "*"};
  for (const auto& [name, value] : fields) {
    args.push_back(name);
    args.push_back(value);
  }
  return redis.call(args).str;
}

long long pending(RedisClient& redis, const std::string& stream = kStream) {
  return redis.call({"XPENDING", stream, "boxcar"}).elements.at(0).integer;
}
long long stream_length(RedisClient& redis, const std::string& stream) { return redis.call({"XLEN", stream}).integer; }

/// The dead-letter stream's entries as field maps, oldest first.
std::vector<std::map<std::string, std::string>> dead_letters(RedisClient& redis,
                                                             const std::string& stream = kDeadLetters) {
  std::vector<std::map<std::string, std::string>> out;
  for (const RedisValue& entry : redis.call({"XRANGE", stream, "-", "+"}).elements) {
    std::map<std::string, std::string> fields;
    const auto& list = entry.elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < list.size(); i += 2) fields[list[i].str] = list[i + 1].str;
    out.push_back(std::move(fields));
  }
  return out;
}

std::int64_t receipts(const boxcar::testing::TestSchema& db) {
  return db.count("SELECT count(*) FROM {schema}.inbox_receipts");
}

boxcar::InboxOptions inbox_options(const boxcar::testing::TestSchema& db) {
  return {.schema = db.schema(), .consumers = {kConsumer}, .notify = false};
}

int closed_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// Spawns the example binary with `env` added to this process's environment.
pid_t spawn_ingress(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> storage;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    if (!env.contains(entry.substr(0, entry.find('=')))) storage.push_back(entry);
  }
  for (const auto& [name, value] : env) storage.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = {EXAMPLE_REDIS_STREAMS_INGRESS_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) == 0);
  return pid;
}

int wait_exit_code(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("the ingress did not exit in time");
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("accepted entries and redeliveries are acknowledged, conflicts and invalid entries are dead-lettered",
          "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  RedisClient redis(redis_options(*server));
  StreamIngress ingress(inbox, redis_options(*server), ingress_options());
  ingress.ensure_group();

  xadd(redis, order("m-1", R"({"orderId":"o-1","total":10})"));
  xadd(redis, order("m-2", R"({"orderId":"o-2","total":20})"));
  xadd(redis, order("m-1", R"({"total":10,"orderId":"o-1"})"));  // redelivery, other key order
  const std::string conflict = xadd(redis, order("m-2", R"({"orderId":"o-2","total":21})"));
  const std::string untyped = xadd(redis, order("m-5", R"({"orderId":"o-5"})", ""));
  const std::string malformed = xadd(redis, order("m-6", R"({"orderId":)"));

  const IngressStats stats = ingress.run_once();  // batches of 3: two transactions
  CHECK(stats.read == 6);
  CHECK(stats.accepted == 2);
  CHECK(stats.duplicates == 1);
  CHECK(stats.dead_lettered == 3);
  CHECK(stats.storage_failures == 0);

  CHECK(receipts(db) == 2);
  CHECK(pending(redis) == 0);
  const auto dead = dead_letters(redis);
  REQUIRE(dead.size() == 3);
  CHECK(dead[0].at("entry_id") == conflict);
  CHECK(dead[0].at("error_code") == "IDENTITY_CONFLICT");
  CHECK(dead[0].at("error_field") == "id");
  CHECK(dead[0].at("data") == R"({"orderId":"o-2","total":21})");  // the original entry travels along
  CHECK(dead[1].at("entry_id") == untyped);
  CHECK(dead[1].at("error_code") == "INBOX_FIELD_REQUIRED");
  CHECK(dead[1].at("error_field") == "type");
  CHECK(dead[2].at("entry_id") == malformed);
  CHECK(dead[2].at("error_code") == "JSON_PARSE_ERROR");
  CHECK(dead[2].at("error_field").starts_with("data"));

  // A later redelivery of an accepted identity is a duplicate: acknowledged, no new receipt.
  xadd(redis, order("m-1", R"({"orderId":"o-1","total":10})"));
  const IngressStats again = ingress.run_once();
  CHECK(again.duplicates == 1);
  CHECK(again.dead_lettered == 0);
  CHECK(receipts(db) == 2);
  CHECK(pending(redis) == 0);
  CHECK(stream_length(redis, kDeadLetters) == 3);
}

TEST_CASE("a storage failure acknowledges nothing, and the pending entries are accepted once the database is back",
          "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  RedisClient redis(redis_options(*server));

  {
    const std::string dead_url =
        "postgresql://boxcar@127.0.0.1:" + std::to_string(closed_loopback_port()) + "/postgres?connect_timeout=2";
    boxcar::Inbox unreachable(boxcar::ConnectionPool::create({.url = dead_url, .size = 1}), inbox_options(db));
    StreamIngress ingress(unreachable, redis_options(*server), ingress_options());
    ingress.ensure_group();
    xadd(redis, order("m-1", R"({"orderId":"o-1"})"));
    xadd(redis, order("m-2", R"({"orderId":"o-2"})"));
    xadd(redis, order("m-3", R"({"orderId":"o-3"})", ""));  // invalid, but in the failed batch

    const IngressStats stats = ingress.run_once();
    CHECK(stats.storage_failures == 1);
    CHECK(stats.accepted == 0);
    CHECK(stats.dead_lettered == 0);
    CHECK(pending(redis) == 3);  // read, delivered, not acknowledged
    CHECK(stream_length(redis, kDeadLetters) == 0);
  }

  // The same consumer, now with a working database: its own pending entries come first.
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  StreamIngress ingress(inbox, redis_options(*server), ingress_options());
  const IngressStats stats = ingress.run_once();
  CHECK(stats.accepted == 2);
  CHECK(stats.dead_lettered == 1);
  CHECK(receipts(db) == 2);
  CHECK(pending(redis) == 0);
  CHECK(stream_length(redis, kDeadLetters) == 1);
}

TEST_CASE("entries a crashed consumer read but never acknowledged are reclaimed and accepted on the next run",
          "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  RedisClient redis(redis_options(*server));
  StreamIngress(inbox, redis_options(*server), ingress_options()).ensure_group();
  for (int i = 1; i <= 4; ++i) xadd(redis, order("m-" + std::to_string(i), R"({"n":)" + std::to_string(i) + "}"));

  SECTION("the same consumer restarts and re-reads its own pending entries") {
    // The "crash": delivered to ingress-a, never acknowledged.
    redis.call({"XREADGROUP", "GROUP", "boxcar", "ingress-a", "COUNT", "10", "STREAMS", kStream, ">"});
    REQUIRE(pending(redis) == 4);
    auto options = ingress_options("ingress-a");
    options.claim_min_idle = 1h;  // no claiming from others: this is the ID 0 path
    const IngressStats stats = StreamIngress(inbox, redis_options(*server), options).run_once();
    CHECK(stats.accepted == 4);
    CHECK(receipts(db) == 4);
    CHECK(pending(redis) == 0);
  }

  SECTION("another consumer claims what a dead consumer left idle longer than the minimum") {
    redis.call({"XREADGROUP", "GROUP", "boxcar", "ingress-dead", "COUNT", "10", "STREAMS", kStream, ">"});
    REQUIRE(pending(redis) == 4);

    auto patient = ingress_options("ingress-b");
    patient.claim_min_idle = 1h;  // not idle long enough yet: left alone
    CHECK(StreamIngress(inbox, redis_options(*server), patient).run_once().read == 0);
    CHECK(pending(redis) == 4);

    std::this_thread::sleep_for(150ms);
    auto eager = ingress_options("ingress-b");
    eager.claim_min_idle = 100ms;
    const IngressStats stats = StreamIngress(inbox, redis_options(*server), eager).run_once();
    CHECK(stats.accepted == 4);
    CHECK(receipts(db) == 4);
    CHECK(pending(redis) == 0);
  }
}

TEST_CASE("the running consumer accepts new entries as they arrive and stops when asked", "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  RedisClient redis(redis_options(*server));
  StreamIngress ingress(inbox, redis_options(*server), ingress_options());
  ingress.ensure_group();

  std::atomic<bool> stop{false};
  IngressStats stats;
  std::thread runner([&] { stats = ingress.run(stop); });
  for (int i = 1; i <= 5; ++i) xadd(redis, order("m-" + std::to_string(i), R"({"n":)" + std::to_string(i) + "}"));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (receipts(db) < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  stop = true;
  runner.join();
  CHECK(receipts(db) == 5);
  CHECK(stats.accepted == 5);
  CHECK(pending(redis) == 0);
}

TEST_CASE("the running consumer backs off and retries while the database is down, acknowledging nothing", "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  const std::string dead_url =
      "postgresql://boxcar@127.0.0.1:" + std::to_string(closed_loopback_port()) + "/postgres?connect_timeout=2";
  boxcar::Inbox unreachable(boxcar::ConnectionPool::create({.url = dead_url, .size = 1}), inbox_options(db));
  RedisClient redis(redis_options(*server));
  StreamIngress ingress(unreachable, redis_options(*server), ingress_options());
  ingress.ensure_group();
  xadd(redis, order("m-1", R"({"orderId":"o-1"})"));
  xadd(redis, order("m-2", R"({"orderId":"o-2"})", ""));

  std::atomic<bool> stop{false};
  IngressStats stats;
  std::thread runner([&] { stats = ingress.run(stop); });
  std::this_thread::sleep_for(600ms);
  stop = true;
  runner.join();
  CHECK(stats.storage_failures >= 2);  // retried the same pending batch after backing off
  CHECK(stats.accepted == 0);
  CHECK(stats.dead_lettered == 0);
  CHECK(pending(redis) == 2);
  CHECK(stream_length(redis, kDeadLetters) == 0);
}

TEST_CASE("the example binary drains the stream with --once and exits on SIGTERM otherwise", "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  const std::string schema = db.schema() + "_bin";
  // The deployment's migrate step, before the ingress starts: the binary never migrates.
  boxcar::migrate(db.url(), {.schema = schema});
  RedisClient redis(redis_options(*server));
  // The group starts at '$': create it before producing, as a deployment would.
  redis.call({"XGROUP", "CREATE", kStream, "boxcar", "$", "MKSTREAM"});
  xadd(redis, order("m-1", R"({"orderId":"o-1"})"));
  xadd(redis, order("m-1", R"({"orderId":"o-1"})"));
  xadd(redis, order("m-2", R"({"orderId":"o-2"})", ""));

  const std::map<std::string, std::string> env = {{"BOXCAR_DATABASE_URL", db.url()}, {"BOXCAR_SCHEMA", schema},
                                                  {"REDIS_URL", server->url()},      {"REDIS_TENANTS", "tenant-7"},
                                                  {"REDIS_GROUP", "boxcar"},         {"REDIS_CONSUMER_NAME", "bin-1"},
                                                  {"REDIS_BLOCK_MS", "100"}};
  CHECK(wait_exit_code(spawn_ingress({"--once"}, env), 60s) == 0);
  const auto count = [&] { return db.count("SELECT count(*) FROM \"" + schema + "\".inbox_receipts"); };
  CHECK(count() == 1);
  CHECK(pending(redis) == 0);
  CHECK(stream_length(redis, kDeadLetters) == 1);

  const pid_t pid = spawn_ingress({}, env);
  xadd(redis, order("m-3", R"({"orderId":"o-3"})"));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (count() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  CHECK(count() == 2);
  ::kill(pid, SIGTERM);
  CHECK(wait_exit_code(pid, 20s) == 0);
  CHECK(pending(redis) == 0);
  db.query("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
}

TEST_CASE(
    "the tenant is the stream key, which only that tenant's ACL user can write, and an entry naming another "
    "tenant is dead-lettered",
    "[redis]") {
  const auto server = start_redis_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  RedisClient admin(redis_options(*server));
  // One ACL user per tenant, allowed to XADD to its own stream key and nothing else.
  for (const char* tenant : {"tenant-7", "tenant-8"}) {
    admin.call({"ACL", "SETUSER", tenant, "on", std::string(">") + tenant + "-secret",
                std::string("~") + tenant_stream("orders", tenant), "-@all", "+xadd"});
  }
  auto options_for = [](const std::string& tenant) {
    auto options = ingress_options();
    options.stream = tenant_stream("orders", tenant);
    return options;
  };
  StreamIngress ingress7(inbox, redis_options(*server), options_for("tenant-7"));
  StreamIngress ingress8(inbox, redis_options(*server), options_for("tenant-8"));
  ingress7.ensure_group();
  ingress8.ensure_group();

  RedisOptions as7 = redis_options(*server);
  as7.username = "tenant-7";
  as7.password = "tenant-7-secret";
  RedisOptions as8 = redis_options(*server);
  as8.username = "tenant-8";
  as8.password = "tenant-8-secret";
  RedisClient tenant7(as7), tenant8(as8);
  xadd(tenant7, order("m-1", R"({"orderId":"o-1"})"), "orders:tenant-7");
  xadd(tenant8, order("m-1", R"({"orderId":"o-1"})"), "orders:tenant-8");  // another tenant's m-1
  Fields claims_seven = order("m-2", R"({"orderId":"o-2"})");
  claims_seven.emplace_back("tenant", "tenant-7");
  xadd(tenant8, claims_seven, "orders:tenant-8");
  // tenant-7 cannot write tenant-8's stream at all: Redis refuses it.
  const RedisValue refused = tenant7.command(
      {"XADD", "orders:tenant-8", "*", "id", "m-3", "type", "order.created", "version", "1", "data", "{}"});
  REQUIRE(refused.is_error());
  CHECK(refused.str.starts_with("NOPERM"));

  const IngressStats stats7 = ingress7.run_once();
  const IngressStats stats8 = ingress8.run_once();
  CHECK(stats7.accepted == 1);
  CHECK(stats8.accepted == 1);
  CHECK(stats8.dead_lettered == 1);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-1' "
                 "AND scope_kind = 'tenant' AND scope_id IN ('tenant-7', 'tenant-8')") == 2);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id IN ('m-2', 'm-3')") == 0);
  const auto dead = dead_letters(admin, "orders:tenant-8:dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].at("error_code") == "TENANT_MISMATCH");
  CHECK(dead[0].at("error_field") == "tenant");

  // A stream key that names no tenant is a configuration error, not a default tenant.
  auto unnamed = ingress_options();
  unnamed.stream = "orders";
  CHECK_THROWS_AS(StreamIngress(inbox, redis_options(*server), unnamed), std::invalid_argument);
}

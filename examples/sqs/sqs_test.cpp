// Integration tests of the SQS ingress against a real, throw-away SQS-compatible server
// (local-aws-sqs on Debian's nodejs) and a fresh inbox schema: what is deleted, what
// reappears after its visibility timeout, and what lands in the dead-letter queue.
// Everything is checked by counting receipts and queue contents.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "sqs_client.hpp"
#include "sqs_ingress.hpp"
#include "sqs_server.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "boxcar/testing/testing.hpp"

extern char** environ;

using namespace boxcar::examples::sqs;
using namespace std::chrono_literals;

namespace {

constexpr const char* kConsumer = "orders.projection.v1";
/// Short, so a test can wait for messages to reappear.
constexpr int kVisibilitySeconds = 2;

/// ctest's SKIP_RETURN_CODE for this suite (CMakeLists.txt).
constexpr int kSkipped = 77;

/// The server; when node or npm is not installed the process ends with kSkipped, which
/// ctest reports as skipped: a test that could not run never counts as passed.
std::unique_ptr<testing::SqsServer> start_sqs_or_skip() {
  if (const auto reason = testing::SqsServer::unavailable_reason()) {
    std::cout << "SKIPPED: " << *reason << "; the SQS example is not tested" << std::endl;
    std::exit(kSkipped);
  }
  return std::make_unique<testing::SqsServer>();
}

/// A tenant's queue and its dead-letter queue, created on the server.
TenantQueue create_tenant_queue(SqsClient& sqs, const std::string& tenant) {
  const std::string name = "orders-" + tenant;
  return {.tenant = tenant,
          .queue_url = sqs.create_queue(name, {{"VisibilityTimeout", std::to_string(kVisibilitySeconds)}}),
          .dead_letter_queue_url = sqs.create_queue(name + "-dead-letter")};
}

IngressOptions ingress_options() {
  return {.receive = {.max_messages = 10, .wait_seconds = 0}, .backoff = {.base = 10ms, .cap = 50ms}};
}

MessageAttributes order_attributes(const std::string& event_id, const std::string& type = "order.created",
                                   const std::string& version = "1") {
  MessageAttributes attributes;
  if (!event_id.empty()) attributes["event-id"] = {.string_value = event_id};
  if (!type.empty()) attributes["event-type"] = {.string_value = type};
  if (!version.empty()) attributes["schema-version"] = {.data_type = "Number", .string_value = version};
  return attributes;
}

/// Messages in the queue, visible or in flight (received, not yet deleted). local-aws-sqs
/// counts both in ApproximateNumberOfMessages; AWS counts only the visible ones there.
int messages_in(SqsClient& sqs, const std::string& queue_url) {
  const auto attributes = sqs.get_queue_attributes(queue_url, {"ApproximateNumberOfMessages"});
  return std::stoi(attributes.at("ApproximateNumberOfMessages"));
}
int messages_in_flight(SqsClient& sqs, const std::string& queue_url) {
  return std::stoi(sqs.get_queue_attributes(queue_url, {"ApproximateNumberOfMessagesNotVisible"})
                       .at("ApproximateNumberOfMessagesNotVisible"));
}

std::int64_t receipts(const boxcar::testing::TestSchema& db) {
  return db.count("SELECT count(*) FROM {schema}.inbox_receipts");
}

boxcar::InboxOptions inbox_options(const boxcar::testing::TestSchema& db) {
  return {.schema = db.schema(), .consumers = {kConsumer}, .notify = false};
}

/// Waits until nothing of the queue is in flight any more (the visibility timeout ran out).
void wait_until_visible_again(SqsClient& sqs, const std::string& queue_url) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kVisibilitySeconds + 10);
  while (messages_in_flight(sqs, queue_url) > 0) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(100ms);
  }
}

std::string attribute(const SqsMessage& message, const std::string& name) {
  const auto it = message.attributes.find(name);
  return it == message.attributes.end() ? std::string("(absent)") : it->second.string_value;
}

/// Every message of the queue, received with a long visibility timeout (so each once).
std::vector<SqsMessage> receive_all(SqsClient& sqs, const std::string& queue_url) {
  std::vector<SqsMessage> all;
  for (;;) {
    auto batch =
        sqs.receive_message(queue_url, {.max_messages = 10, .wait_seconds = 0, .visibility_timeout_seconds = 600});
    if (batch.empty()) return all;
    all.insert(all.end(), batch.begin(), batch.end());
  }
}

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
  std::vector<std::string> argv_storage = {EXAMPLE_SQS_INGRESS_PATH};
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

TEST_CASE("accepted messages are deleted, and a redelivery of an accepted event is a duplicate that is deleted too",
          "[sqs]") {
  const auto server = start_sqs_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  SqsClient sqs({.endpoint = server->endpoint()});
  const TenantQueue queue = create_tenant_queue(sqs, "tenant-7");
  SqsIngress ingress(inbox, {.endpoint = server->endpoint()}, queue, ingress_options());

  sqs.send_message(queue.queue_url, R"({"orderId":"o-1","total":10})", order_attributes("evt-1"));
  sqs.send_message(queue.queue_url, R"({"orderId":"o-2","total":20})", order_attributes("evt-2"));
  // The producer re-sends evt-1 (say, after a timeout): SQS gives it a new MessageId, the
  // event id is what makes it the same message. Key order does not matter.
  sqs.send_message(queue.queue_url, R"({"total":10,"orderId":"o-1"})", order_attributes("evt-1"));

  const IngressStats stats = ingress.drain();
  CHECK(stats.received == 3);
  CHECK(stats.accepted == 2);
  CHECK(stats.duplicates == 1);
  CHECK(stats.dead_lettered == 0);
  CHECK(stats.unsettled == 0);
  CHECK(receipts(db) == 2);
  // The tenant is the queue's.
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_kind = 'tenant' AND scope_id = "
                 "'tenant-7'") == 2);
  CHECK(messages_in(sqs, queue.queue_url) == 0);

  // SQS itself redelivers: an ingress accepted evt-3 and died before its delete. The same
  // SQS message comes back after the visibility timeout and is a duplicate now.
  sqs.send_message(queue.queue_url, R"({"orderId":"o-3"})", order_attributes("evt-3"));
  const auto first = sqs.receive_message(queue.queue_url, {.max_messages = 1, .wait_seconds = 0});
  REQUIRE(first.size() == 1);
  const MappedMessage mapped = map_message(first[0], queue, ingress_options());
  REQUIRE(mapped.request);
  CHECK(inbox.accept(*mapped.request).kind == boxcar::Receipt::Kind::Accepted);  // ... and no delete
  CHECK(messages_in_flight(sqs, queue.queue_url) == 1);
  wait_until_visible_again(sqs, queue.queue_url);

  const IngressStats redelivery = ingress.drain();
  CHECK(redelivery.received == 1);
  CHECK(redelivery.accepted == 0);
  CHECK(redelivery.duplicates == 1);
  CHECK(receipts(db) == 3);
  CHECK(messages_in(sqs, queue.queue_url) == 0);
  CHECK(messages_in(sqs, queue.dead_letter_queue_url) == 0);
}

TEST_CASE(
    "a database outage deletes nothing: the messages reappear after their visibility timeout and are accepted "
    "once the database is back",
    "[sqs]") {
  const auto server = start_sqs_or_skip();
  boxcar::testing::TestSchema db;
  SqsClient sqs({.endpoint = server->endpoint()});
  const TenantQueue queue = create_tenant_queue(sqs, "tenant-7");

  // The inbox reaches PostgreSQL through a proxy; closing the proxy cuts its open
  // connections and refuses new ones: the database is gone for this process.
  std::smatch port;
  const std::string url = db.url();
  REQUIRE(std::regex_search(url, port, std::regex(R"(@[^:/]+:(\d+)/)")));
  auto proxy = std::make_unique<boxcar::testing::TcpProxy>("127.0.0.1", std::stoi(port[1]));
  {
    boxcar::Inbox inbox(boxcar::ConnectionPool::create({.url = proxy->route(url), .size = 2}), inbox_options(db));
    SqsIngress ingress(inbox, {.endpoint = server->endpoint()}, queue, ingress_options());
    sqs.send_message(queue.queue_url, R"({"orderId":"o-0"})", order_attributes("evt-0"));
    REQUIRE(ingress.drain().accepted == 1);  // the connection through the proxy works

    proxy.reset();  // the outage
    for (int i = 1; i <= 3; ++i) {
      sqs.send_message(queue.queue_url, R"({"orderId":"o-)" + std::to_string(i) + R"("})",
                       order_attributes("evt-" + std::to_string(i)));
    }
    // A poison message in the failed batch is not dead-lettered either: the whole batch
    // comes back as it was.
    sqs.send_message(queue.queue_url, "not json", order_attributes("evt-4"));

    const IngressStats failed = ingress.drain();
    CHECK(failed.received == 4);
    CHECK(failed.storage_failures == 1);
    CHECK(failed.accepted == 0);
    CHECK(failed.dead_lettered == 0);
    CHECK(messages_in_flight(sqs, queue.queue_url) == 4);  // received, not deleted
    CHECK(messages_in(sqs, queue.dead_letter_queue_url) == 0);
    CHECK(receipts(db) == 1);

    // Still down when they reappear: received again, still not deleted.
    wait_until_visible_again(sqs, queue.queue_url);
    const IngressStats again = ingress.drain();
    CHECK(again.received == 4);
    CHECK(again.storage_failures == 1);
    CHECK(messages_in(sqs, queue.queue_url) == 4);
  }

  // The database is back (a new pool, as after a restart of the ingress).
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  SqsIngress ingress(inbox, {.endpoint = server->endpoint()}, queue, ingress_options());
  wait_until_visible_again(sqs, queue.queue_url);
  const IngressStats recovered = ingress.drain();
  CHECK(recovered.received == 4);
  CHECK(recovered.accepted == 3);
  CHECK(recovered.dead_lettered == 1);
  CHECK(recovered.storage_failures == 0);
  CHECK(receipts(db) == 4);
  CHECK(messages_in(sqs, queue.queue_url) == 0);
  CHECK(messages_in(sqs, queue.dead_letter_queue_url) == 1);
}

TEST_CASE(
    "poison messages go to the dead-letter queue with their reason and leave the source queue, and the "
    "messages around them are accepted",
    "[sqs]") {
  const auto server = start_sqs_or_skip();
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), inbox_options(db));
  SqsClient sqs({.endpoint = server->endpoint()});
  const TenantQueue queue = create_tenant_queue(sqs, "tenant-7");
  SqsIngress ingress(inbox, {.endpoint = server->endpoint()}, queue, ingress_options());

  sqs.send_message(queue.queue_url, R"({"orderId":"o-1","total":10})", order_attributes("evt-1"));
  REQUIRE(ingress.drain().accepted == 1);

  std::map<std::string, std::string> poison;  // SQS MessageId -> what is wrong with it
  poison[sqs.send_message(queue.queue_url, R"({"orderId":"o-1","total":11})", order_attributes("evt-1"))] = "conflict";
  sqs.send_message(queue.queue_url, R"({"orderId":"o-2"})", order_attributes("evt-2"));
  poison[sqs.send_message(queue.queue_url, "not json", order_attributes("evt-3"))] = "not json";
  poison[sqs.send_message(queue.queue_url, R"({"orderId":"o-4"})", order_attributes("evt-4", ""))] = "no type";
  poison[sqs.send_message(queue.queue_url, R"({"orderId":"o-5"})", order_attributes(""))] = "no event id";
  poison[sqs.send_message(queue.queue_url, R"({"a":1,"a":2})", order_attributes("evt-6"))] = "duplicate key";
  sqs.send_message(queue.queue_url, R"({"orderId":"o-7"})", order_attributes("evt-7"));

  const IngressStats stats = ingress.drain();
  CHECK(stats.received == 7);
  CHECK(stats.accepted == 2);
  CHECK(stats.dead_lettered == 5);
  CHECK(stats.unsettled == 0);
  CHECK(receipts(db) == 3);
  CHECK(messages_in(sqs, queue.queue_url) == 0);

  const std::vector<SqsMessage> dead = receive_all(sqs, queue.dead_letter_queue_url);
  REQUIRE(dead.size() == 5);
  std::map<std::string, std::string> reasons;  // what was wrong -> code @ field
  for (const SqsMessage& letter : dead) {
    const std::string original = attribute(letter, kDeadLetterMessageId);
    REQUIRE(poison.contains(original));
    reasons[poison.at(original)] = attribute(letter, kDeadLetterCode) + " @ " + attribute(letter, kDeadLetterField);
    CHECK(attribute(letter, kDeadLetterReason) != "(absent)");
    if (poison.at(original) == "conflict") {
      // The original travels along unchanged, with its own attributes.
      CHECK(letter.body == R"({"orderId":"o-1","total":11})");
      CHECK(attribute(letter, "event-id") == "evt-1");
      CHECK(attribute(letter, "schema-version") == "1");
    }
  }
  CHECK(reasons.at("conflict") == "IDENTITY_CONFLICT @ event-id");
  CHECK(reasons.at("not json") == "JSON_PARSE_ERROR @ body");
  CHECK(reasons.at("no type") == "INBOX_FIELD_REQUIRED @ event-type");
  CHECK(reasons.at("no event id") == "INBOX_FIELD_REQUIRED @ event-id");
  CHECK(reasons.at("duplicate key") == "JSON_DUPLICATE_KEY @ body/a");
}

TEST_CASE("the ingress binary takes each tenant from its queue and exits 0 with --once when everything is settled",
          "[sqs]") {
  const auto server = start_sqs_or_skip();
  boxcar::testing::TestSchema db;
  SqsClient sqs({.endpoint = server->endpoint()});
  const TenantQueue seven = create_tenant_queue(sqs, "tenant-7");
  const TenantQueue nine = create_tenant_queue(sqs, "tenant-9");
  // The same event id in two tenants' queues: two identities, one per tenant.
  sqs.send_message(seven.queue_url, R"({"orderId":"o-1"})", order_attributes("evt-1"));
  sqs.send_message(nine.queue_url, R"({"orderId":"o-1"})", order_attributes("evt-1"));
  sqs.send_message(nine.queue_url, R"({"orderId":"o-2"})", order_attributes("evt-2"));

  const std::string tenant_queues = "tenant-7=" + seven.queue_url + " tenant-9=" + nine.queue_url;
  const pid_t pid = spawn_ingress({"--once"}, {{"BOXCAR_DATABASE_URL", db.url()},
                                               {"BOXCAR_SCHEMA", db.schema()},
                                               {"SQS_ENDPOINT", server->endpoint()},
                                               {"SQS_TENANT_QUEUES", tenant_queues},
                                               {"SQS_WAIT_SECONDS", "0"},
                                               // Exercises SigV4 signing (the local server does not check it).
                                               {"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"},
                                               {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}});
  CHECK(wait_exit_code(pid, 60s) == 0);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_id = 'tenant-7'") == 1);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_id = 'tenant-9'") == 2);
  CHECK(messages_in(sqs, seven.queue_url) == 0);
  CHECK(messages_in(sqs, nine.queue_url) == 0);

  // A configuration error is a usage error.
  const pid_t bad = spawn_ingress(
      {"--once"},
      {{"BOXCAR_DATABASE_URL", db.url()}, {"SQS_ENDPOINT", server->endpoint()}, {"SQS_TENANT_QUEUES", "no-url-here"}});
  CHECK(wait_exit_code(bad, 30s) == 2);
}

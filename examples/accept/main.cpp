// The README's accept() example: an ingress that records one message durably before it
// would acknowledge it to its transport.
//
//   BOXCAR_DATABASE_URL=postgresql://migrator@... [BOXCAR_SCHEMA=boxcar] example_accept migrate
//   BOXCAR_DATABASE_URL=postgresql://ingress@... [BOXCAR_SCHEMA=boxcar] example_accept
//
// The ingress never migrates: `migrate` runs once, before it, as the user that may do DDL
// (like `boxcar migrate --roles`, docs/operations.md "Roles"); the ingress itself needs only
// the boxcar_ingress role.
#include <cstdlib>
#include <iostream>
#include <string>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/migrate.hpp"

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (!command.empty() && command != "migrate") {
    std::cerr << "usage: example_accept [migrate]\n";
    return 2;
  }
  const char* url = std::getenv("BOXCAR_DATABASE_URL");
  if (!url) {
    std::cerr << "set BOXCAR_DATABASE_URL\n";
    return 2;
  }
  const char* schema_env = std::getenv("BOXCAR_SCHEMA");
  const std::string schema = schema_env ? schema_env : "boxcar";
  if (command == "migrate") {
    boxcar::migrate(url, {.schema = schema});  // idempotent; also `boxcar migrate`
    return 0;
  }

  auto pool = boxcar::ConnectionPool::create({.url = url});
  boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {"orders.projection.v1"}});

  const nlohmann::json event = {{"id", "evt-1001"}, {"orderId", "o-42"}, {"total", 99.5}};
  try {
    const boxcar::Receipt receipt = inbox.accept({
        .scope = boxcar::Scope::tenant("tenant-7"),  // from the authenticated caller
        .source = "orders-service",
        .consumer = "orders.projection.v1",
        .message_id = event["id"],
        .event_type = "order.created",
        .schema_version = 1,
        .payload = {{"orderId", event["orderId"]}, {"total", event["total"]}},
    });
    // Accepted or Duplicate: the message is durable; acknowledge the delivery now.
    std::cout << boxcar::to_string(receipt.kind) << " receipt " << receipt.id << " ("
              << boxcar::to_string(receipt.status) << ")\n";
  } catch (const boxcar::InboxStorageError& e) {
    // Do not acknowledge: let the transport redeliver the same identity.
    std::cerr << e.code() << (e.uncertain() ? " (may have committed)" : "") << ": " << e.what() << "\n";
    return 1;
  } catch (const boxcar::Error& e) {
    // Invalid input or IDENTITY_CONFLICT: reject / dead-letter, never retry immediately.
    std::cerr << e.code() << ": " << e.what() << "\n";
    return 1;
  }
}

// Boxcar's statements run under the application's search_path. A role that can create
// functions in a schema on that path (public, for many roles) can plant an exact-type
// overload that beats a polymorphic built-in (CVE-2018-1058 class): the statements call
// such built-ins as pg_catalog.<name>. The operator commands' case is in operator_test.cpp;
// the whole pipeline against a plant of every built-in is search_path_hijack_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/detail/async_notifier.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;

namespace {

class Payloads final : public pqxx::notification_receiver {
 public:
  Payloads(pqxx::connection_base& c, const std::string& channel) : pqxx::notification_receiver(c, channel) {}
  void operator()(const std::string& payload, int) override { received.push_back(payload); }
  std::vector<std::string> received;
};

}  // namespace

TEST_CASE("the notifier sends its own payloads even with an unnest planted on its search_path") {
  TestDatabase db;
  const std::string planted = db.schema() + "_planted";
  {
    auto c = db.connect();
    pqxx::nontransaction setup(c);
    setup.exec("CREATE SCHEMA " + planted);
    // unnest(text[]) is an exact match for the notifier's text[] argument, so an unqualified
    // call would resolve here instead of pg_catalog.unnest(anyarray).
    setup.exec("CREATE FUNCTION " + planted +
               ".unnest(text[]) RETURNS SETOF text LANGUAGE sql AS $$SELECT 'planted'$$");
  }
  const std::string channel = db.schema() + "_wakeup";
  auto listener_connection = db.connect();
  Payloads listener(listener_connection, channel);

  const auto separator = db.url().find('?') == std::string::npos ? "?" : "&";
  {
    boxcar::detail::AsyncNotifier notifier(db.url() + separator + "options=-csearch_path%3D" + planted + "%2Cpublic",
                                           channel);
    notifier.notify("orders.v1");
    notifier.flush();
  }
  // Liveness bound only: the notification was sent before flush() returned.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (listener.received.empty() && std::chrono::steady_clock::now() < deadline)
    listener_connection.await_notification(0, 200000);
  CHECK(listener.received == std::vector<std::string>{"orders.v1"});

  auto c = db.connect();
  pqxx::nontransaction(c).exec("DROP SCHEMA " + planted + " CASCADE");
}

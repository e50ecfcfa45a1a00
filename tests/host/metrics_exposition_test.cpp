// The metrics registry's exposition: every method under its documented name and labels,
// zeros before anything happened, clamped durations, and no lost increments under
// concurrent updates and scrapes.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "boxcar/core/metrics.hpp"
#include "exposition.hpp"

using namespace boxcar;
using namespace boxcar::testing;

TEST_CASE("every metrics method shows up in the exposition under its documented name and labels") {
  Metrics metrics;
  metrics.accept_result("orders.v1", "accepted");
  metrics.accept_result("orders.v1", "accepted");
  metrics.accept_result("orders.v1", "duplicate");
  metrics.processed("orders.v1", "order.created", "completed");
  metrics.processed("orders.v1", "order.created", "retried");
  metrics.processed("orders.v1", "order.created", "retried");
  metrics.handler_duration("orders.v1", 0.003);
  metrics.handler_duration("orders.v1", 0.2);
  metrics.accept_to_complete("orders.v1", 1.5);
  metrics.claimed("orders.v1", 7);
  metrics.claimed("orders.v1", 1);
  metrics.claim_statement("orders.v1");
  metrics.claim_statement("orders.v1");
  metrics.infrastructure_retry("orders.v1", "pool_timeout");
  metrics.infrastructure_retry("orders.v1", "pool_timeout");
  metrics.crash_strike("orders.v1");
  metrics.emitted("order.projected", "orders.projected");
  metrics.published("orders.projected", "delivered", 3);
  metrics.published("orders.projected", "failed");
  metrics.emit_to_delivered("orders.projected", 0.04);
  metrics.set_in_flight_events(4);
  metrics.set_inbox_receipts("orders.v1", "PENDING", 12);
  metrics.set_inbox_receipts_estimated("orders.v1", "PENDING", true);
  metrics.set_inbox_receipts_estimated("orders.v1", "DEAD", false);
  metrics.set_inbox_oldest_due_age("orders.v1", 42.5);
  metrics.set_outbox_events("DEAD", 2);
  metrics.set_outbox_oldest_unpublished_age(9);
  metrics.set_table_health("inbox_receipts", 150, 8192);
  metrics.set_notify_queue_usage(0.125);
  metrics.set_xmin_horizon_age(76577);
  metrics.backlog_collected(0.25, true);
  metrics.backlog_collected(0.75, false);
  metrics.backlog_snapshot("inbox", 3.5, false);
  metrics.backlog_snapshot("outbox", 0, true);
  metrics.backlog_snapshot("outbox", 0, true);

  const Exposition e(metrics.serialize());
  CHECK(e.value("boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "accepted"}}) == 2);
  CHECK(e.value("boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "duplicate"}}) == 1);
  CHECK(e.value("boxcar_inbox_processed_total",
                {{"consumer", "orders.v1"}, {"event_type", "order.created"}, {"outcome", "retried"}}) == 2);
  CHECK(e.value("boxcar_inbox_processed_total",
                {{"consumer", "orders.v1"}, {"event_type", "order.created"}, {"outcome", "completed"}}) == 1);

  CHECK(e.value("boxcar_inbox_handler_duration_seconds_count", {{"consumer", "orders.v1"}}) == 2);
  CHECK(e.value("boxcar_inbox_handler_duration_seconds_sum", {{"consumer", "orders.v1"}}) == Approx(0.203));
  CHECK(e.bucket("boxcar_inbox_handler_duration_seconds", {{"consumer", "orders.v1"}}, 0.001) == 0);
  CHECK(e.bucket("boxcar_inbox_handler_duration_seconds", {{"consumer", "orders.v1"}}, 0.005) == 1);
  CHECK(e.bucket("boxcar_inbox_handler_duration_seconds", {{"consumer", "orders.v1"}}, 0.25) == 2);
  CHECK(e.bucket("boxcar_inbox_handler_duration_seconds", {{"consumer", "orders.v1"}}, 30) == 2);
  CHECK(e.value("boxcar_inbox_accept_to_complete_seconds_count", {{"consumer", "orders.v1"}}) == 1);
  CHECK(e.bucket("boxcar_inbox_accept_to_complete_seconds", {{"consumer", "orders.v1"}}, 1.0) == 0);
  CHECK(e.bucket("boxcar_inbox_accept_to_complete_seconds", {{"consumer", "orders.v1"}}, 2.5) == 1);
  CHECK(e.bucket("boxcar_inbox_accept_to_complete_seconds", {{"consumer", "orders.v1"}}, 300) == 1);

  CHECK(e.value("boxcar_inbox_claimed_total", {{"consumer", "orders.v1"}}) == 8);
  CHECK(e.value("boxcar_inbox_claim_batch_size_count") == 2);
  CHECK(e.value("boxcar_worker_claims_total", {{"consumer", "orders.v1"}}) == 2);
  CHECK(e.bucket("boxcar_inbox_claim_batch_size", {}, 1) == 1);
  CHECK(e.bucket("boxcar_inbox_claim_batch_size", {}, 5) == 1);
  CHECK(e.bucket("boxcar_inbox_claim_batch_size", {}, 10) == 2);
  CHECK(e.bucket("boxcar_inbox_claim_batch_size", {}, 1000) == 2);
  CHECK(e.value("boxcar_worker_infrastructure_retries_total",
                {{"consumer", "orders.v1"}, {"reason", "pool_timeout"}}) == 2);
  CHECK(e.value("boxcar_worker_crash_strikes_total", {{"consumer", "orders.v1"}}) == 1);

  CHECK(e.value("boxcar_outbox_emitted_total", {{"event_type", "order.projected"}, {"topic", "orders.projected"}}) ==
        1);
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "orders.projected"}, {"outcome", "delivered"}}) == 3);
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "orders.projected"}, {"outcome", "failed"}}) == 1);
  CHECK(e.bucket("boxcar_publisher_emit_to_delivered_seconds", {{"topic", "orders.projected"}}, 0.025) == 0);
  CHECK(e.bucket("boxcar_publisher_emit_to_delivered_seconds", {{"topic", "orders.projected"}}, 0.05) == 1);
  CHECK(e.value("boxcar_publisher_in_flight_events") == 4);

  CHECK(e.value("boxcar_inbox_receipts", {{"consumer", "orders.v1"}, {"status", "PENDING"}}) == 12);
  CHECK(e.value("boxcar_inbox_receipts_estimated", {{"consumer", "orders.v1"}, {"status", "PENDING"}}) == 1);
  CHECK(e.value("boxcar_inbox_receipts_estimated", {{"consumer", "orders.v1"}, {"status", "DEAD"}}) == 0);
  CHECK(e.value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", "orders.v1"}}) == 42.5);
  CHECK(e.value("boxcar_outbox_events", {{"status", "DEAD"}}) == 2);
  CHECK(e.value("boxcar_outbox_oldest_unpublished_age_seconds") == 9);
  CHECK(e.value("boxcar_table_dead_tuples", {{"table", "inbox_receipts"}}) == 150);
  CHECK(e.value("boxcar_table_size_bytes", {{"table", "inbox_receipts"}}) == 8192);
  CHECK(e.value("boxcar_database_notify_queue_usage_ratio") == 0.125);
  CHECK(e.value("boxcar_database_xmin_horizon_age_transactions") == 76577);
  CHECK(e.value("boxcar_backlog_collection_seconds") == 0.75);
  CHECK(e.value("boxcar_backlog_collection_errors_total") == 1);
  CHECK(e.value("boxcar_backlog_last_success_timestamp_seconds") > 1.7e9);
  CHECK(e.value("boxcar_backlog_snapshot_age_seconds", {{"section", "inbox"}}) == 3.5);
  CHECK(e.value("boxcar_backlog_snapshot_computed_total", {{"section", "inbox"}}) == 0);
  CHECK(e.value("boxcar_backlog_snapshot_computed_total", {{"section", "outbox"}}) == 2);

  CHECK(e.has_line("# TYPE boxcar_inbox_accept_total counter"));
  CHECK(e.has_line("# TYPE boxcar_inbox_handler_duration_seconds histogram"));
  CHECK(e.has_line("# TYPE boxcar_inbox_receipts gauge"));
}

TEST_CASE("unlabelled metrics are exported as zero before anything happened") {
  const Exposition e(Metrics{}.serialize());
  CHECK(e.value("boxcar_publisher_in_flight_events") == 0);
  CHECK(e.value("boxcar_backlog_collection_errors_total") == 0);
  CHECK(e.value("boxcar_outbox_oldest_unpublished_age_seconds") == 0);
  CHECK(e.value("boxcar_backlog_last_success_timestamp_seconds") == 0);
  CHECK(e.value("boxcar_worker_abandoned_handlers_total") == 0);
  CHECK(e.value("boxcar_database_notify_queue_usage_ratio") == 0);
  CHECK(e.value("boxcar_database_xmin_horizon_age_transactions") == 0);
  // Labelled families have no series until a label set is used.
  CHECK_FALSE(e.value("boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "accepted"}}));
}

TEST_CASE("negative durations from clock skew are recorded as zero") {
  Metrics metrics;
  metrics.handler_duration("orders.v1", -0.5);
  metrics.set_inbox_oldest_due_age("orders.v1", -3);
  const Exposition e(metrics.serialize());
  CHECK(e.value("boxcar_inbox_handler_duration_seconds_sum", {{"consumer", "orders.v1"}}) == 0);
  CHECK(e.bucket("boxcar_inbox_handler_duration_seconds", {{"consumer", "orders.v1"}}, 0.001) == 1);
  CHECK(e.value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", "orders.v1"}}) == 0);
}

TEST_CASE("metrics updated from many threads while being serialized lose no increments") {
  Metrics metrics;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done) (void)metrics.serialize();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&metrics, t] {
      const std::string consumer = "c" + std::to_string(t % 2);
      for (int i = 0; i < 5000; ++i) {
        metrics.accept_result(consumer, "accepted");
        metrics.handler_duration(consumer, 0.01);
      }
    });
  for (auto& thread : threads) thread.join();
  done = true;
  scraper.join();
  const Exposition e(metrics.serialize());
  CHECK(e.value("boxcar_inbox_accept_total", {{"consumer", "c0"}, {"result", "accepted"}}) == 10000);
  CHECK(e.value("boxcar_inbox_accept_total", {{"consumer", "c1"}, {"result", "accepted"}}) == 10000);
  CHECK(e.value("boxcar_inbox_handler_duration_seconds_count", {{"consumer", "c1"}}) == 10000);
}

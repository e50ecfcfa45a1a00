// A flood of NOTIFYs on one channel, sent from a connection of its own, and what it does to
// PostgreSQL's notification queue: the tests that prove a wake-up listener keeps reading
// while its owner is busy (docs/worker.md, "Wake-ups"; PITFALLS: a LISTEN connection that is
// not read holds the cluster's NOTIFY queue).
//
// The queue is shared by the whole cluster; its tail is the position of the listener that
// has read the least. pg_notification_queue_usage() is (head page - tail page) over the
// queue's capacity, (QUEUE_MAX_PAGE + 1) / 2 = 1,048,576 pages in PostgreSQL 15
// (src/backend/commands/async.c), so the usage times that is the number of pages held.
//
// Each notification carries kPayloadBytes, more than half a page, so each fills one page
// of its own (an entry never spans two pages), and the flood's page count is its
// notification count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <pqxx/pqxx>

#include "test_database.hpp"

namespace boxcar::testing {

class NotifyFlood {
 public:
  /// Queue pages pg_notification_queue_usage() divides by (PostgreSQL 15).
  static constexpr double kQueueCapacityPages = 1048576.0;
  /// More than half of an 8 kB page and below PostgreSQL's 8,000-byte limit.
  static constexpr std::int64_t kPayloadBytes = 7000;

  NotifyFlood(const TestDatabase& db, std::string channel) : connection_(db.connect()), channel_(std::move(channel)) {
    pqxx::nontransaction tx(connection_);
    block_size_ = tx.exec1("SHOW block_size")[0].as<std::int64_t>();
  }

  /// The page size the page arithmetic assumes (8192 on every stock build).
  std::int64_t block_size() const { return block_size_; }

  /// The most bytes a client that stops reading can leave between its socket and the
  /// listening backend: the kernel's largest receive plus send buffers (TCP autotuning
  /// limits, or the core limits when larger). Above that, the backend blocks sending.
  static std::int64_t socket_buffer_bytes() {
    const auto third = [](const char* path) {
      std::ifstream in(path);
      std::int64_t low = 0, initial = 0, high = 0;
      in >> low >> initial >> high;
      return high;
    };
    const auto one = [](const char* path) {
      std::ifstream in(path);
      std::int64_t value = 0;
      in >> value;
      return value;
    };
    return std::max(third("/proc/sys/net/ipv4/tcp_rmem"), one("/proc/sys/net/core/rmem_max")) +
           std::max(third("/proc/sys/net/ipv4/tcp_wmem"), one("/proc/sys/net/core/wmem_max"));
  }

  /// Notifications needed to send `multiple` times socket_buffer_bytes() of payload.
  static std::int64_t notifications_for(int multiple) {
    return (multiple * socket_buffer_bytes() + kPayloadBytes - 1) / kPayloadBytes;
  }

  /// Commits `count` notifications of distinct payloads (one transaction would merge
  /// identical ones), each kPayloadBytes long: `count` queue pages.
  void send(std::int64_t count) {
    pqxx::nontransaction tx(connection_);
    tx.exec_params(
        "SELECT pg_catalog.count(pg_catalog.pg_notify($1, pg_catalog.rpad(($2 + i)::text || ':', $3, 'x'))) "
        "FROM pg_catalog.generate_series(1, $4::bigint) AS i",
        channel_, sent_, kPayloadBytes, count);
    sent_ += count;
  }

  /// Notifications (= queue pages) sent so far.
  std::int64_t sent() const { return sent_; }

  /// Pages the cluster's notification queue holds now.
  std::int64_t queue_pages() {
    pqxx::nontransaction tx(connection_);
    const double usage = tx.exec1("SELECT pg_catalog.pg_notification_queue_usage()")[0].as<double>();
    return std::llround(usage * kQueueCapacityPages);
  }

  struct Listener {
    int pid = 0;             // 0: no backend LISTENs on the channel
    std::string wait_event;  // pg_stat_activity.wait_event, "" when none
  };
  /// The backend whose last statement was LISTEN on the channel (the channel names the
  /// test's own schema, so it is the one listener the test started).
  Listener listener() {
    pqxx::nontransaction tx(connection_);
    const auto rows = tx.exec_params(
        "SELECT pid, coalesce(wait_event, '') AS wait_event FROM pg_catalog.pg_stat_activity "
        "WHERE query LIKE 'LISTEN %' AND pg_catalog.strpos(query, $1) > 0",
        channel_);
    if (rows.empty()) return {};
    return {rows[0]["pid"].as<int>(), rows[0]["wait_event"].as<std::string>()};
  }

 private:
  pqxx::connection connection_;
  std::string channel_;
  std::int64_t block_size_ = 0;
  std::int64_t sent_ = 0;
};

}  // namespace boxcar::testing

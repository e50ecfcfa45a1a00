// What the publisher suites share: a migrated schema, librdkafka's mock cluster, a pool on
// the schema's database, an emit in a transaction of its own, and counts of outbox rows.
// A suite's own Setup derives from it and adds its topics and helpers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "test_database.hpp"

namespace boxcar::testing {

struct OutboxFixture {
  TestDatabase db;
  MockKafka kafka;
  std::shared_ptr<ConnectionPool> pool = db.pool(6);

  OutboxFixture() = default;
  explicit OutboxFixture(int brokers) : kafka(brokers) {}

  // Emits one event and commits, as a handler's transaction would; returns its event id.
  std::string emit_one(OutboxEmitter& outbox, const OutboxMessage& message, const EmitOptions& options) {
    Tx tx = pool->begin();
    auto event_id = outbox.emit(tx, message, options).event_id;
    tx.commit();
    return event_id;
  }
  // The outbox rows that match an SQL condition, e.g. "status = 'PUBLISHED'".
  std::int64_t count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE " + where);
  }
};

}  // namespace boxcar::testing

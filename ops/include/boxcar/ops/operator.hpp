// Operator commands on a Boxcar schema: the library side of `boxcar status`,
// `boxcar dead list|groups|show|retry|discard|unblock` and `boxcar purge` (docs/operator.md).
//
//   auto report = boxcar::status(*pool, "boxcar", {"orders.projection.v1"});
//   std::cout << boxcar::to_table(report);
//
//   boxcar::DeadFilter filter{.consumer = "orders.projection.v1", .group = "3f2a9c01b7de"};
//   auto planned = boxcar::dead_retry(*pool, "boxcar", boxcar::RecordKind::Inbox, filter,
//                                     "alice", /*dry_run=*/true);
//
// Every function borrows one connection from `pool` for the duration of the call and runs
// its own short transactions (autocommit statements); none takes or leaves a caller's
// transaction. Writes (retry, discard, purge) are single bounded statements, so they can
// run beside live workers and publishers: rows another session holds locked are skipped,
// never waited for.
//
// Thread-safety: every function is safe to call from any thread; results are plain values.
// Errors: OperatorError for invalid requests (before anything is written), ConfigError for
// a malformed schema name, DatabaseError (DATABASE_*) when PostgreSQL fails.
#pragma once

#include "boxcar/ops/dead_records.hpp"
#include "boxcar/ops/ordering_keys.hpp"
#include "boxcar/ops/record_kind.hpp"
#include "boxcar/ops/retention.hpp"
#include "boxcar/ops/status.hpp"

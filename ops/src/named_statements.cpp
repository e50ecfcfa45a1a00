// The ops library's named statements (backlog collector and operator commands), for the test
// that prepares every component's SQL.
#include "boxcar/ops/detail/named_statements.hpp"

#include "backlog_queries.hpp"
#include "console_queries.hpp"
#include "operator_queries.hpp"
#include "retention_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> ops_statements() {
  return {{"backlog.inbox_claimable", backlog_sql::kInboxClaimable},
          {"backlog.inbox_processing", backlog_sql::kInboxProcessing},
          {"backlog.inbox_dead", backlog_sql::kInboxDead},
          {"backlog.inbox_waiting", backlog_sql::kInboxWaiting},
          {"backlog.inbox_blocked_keys", backlog_sql::kInboxBlockedKeys},
          {"backlog.outbox_due", backlog_sql::kOutboxDue},
          {"backlog.outbox_publishing", backlog_sql::kOutboxPublishing},
          {"backlog.outbox_dead", backlog_sql::kOutboxDead},
          {"backlog.outbox_waiting", backlog_sql::kOutboxWaiting},
          {"backlog.table_health", backlog_sql::kTableHealth},
          {"backlog.notify_queue_usage", backlog_sql::kNotifyQueueUsage},
          {"backlog.xmin_outside_sessions", backlog_sql::kXminOutsideSessions},
          {"backlog.readable_tables", backlog_sql::kReadableTables},
          {"backlog.inbox_estimates", backlog_sql::kInboxEstimates},
          {"backlog.snapshot_claim", backlog_sql::kSnapshotClaim},
          {"backlog.snapshot_store", backlog_sql::kSnapshotStore},
          {"backlog.snapshot_read", backlog_sql::kSnapshotRead},
          {"operator.inbox_status", operator_sql::kInboxStatus},
          {"operator.outbox_status", operator_sql::kOutboxStatus},
          {"operator.inbox_dead_list", operator_sql::kInboxDeadList},
          {"operator.outbox_dead_list", operator_sql::kOutboxDeadList},
          {"operator.inbox_dead_show", operator_sql::kInboxDeadShow},
          {"operator.outbox_dead_show", operator_sql::kOutboxDeadShow},
          {"operator.inbox_dead_groups", operator_sql::kInboxDeadGroups},
          {"operator.outbox_dead_groups", operator_sql::kOutboxDeadGroups},
          {"operator.inbox_retry", operator_sql::kInboxRetry},
          {"operator.outbox_retry", operator_sql::kOutboxRetry},
          {"operator.inbox_discard", operator_sql::kInboxDiscard},
          {"operator.outbox_discard", operator_sql::kOutboxDiscard},
          {"operator.notify", operator_sql::kNotify},
          {"operator.blocked_keys", operator_sql::kBlockedKeys},
          {"operator.unblock_key", operator_sql::kUnblockKey},
          {"retention.purge_inbox", retention_sql::kPurgeInbox},
          {"retention.purge_inbox_count", retention_sql::kPurgeInboxCount},
          {"retention.dead_consumer_after", retention_sql::kDeadConsumerAfter},
          {"retention.purge_dead", retention_sql::kPurgeDead},
          {"retention.purge_dead_count", retention_sql::kPurgeDeadCount},
          {"retention.orphaned_partitions", retention_sql::kOrphanedPartitions},
          {"retention.create_partitions", retention_sql::kCreatePartitions},
          {"retention.partitions", retention_sql::kPartitions},
          {"retention.partition_retirable", retention_sql::kPartitionRetirable},
          {"retention.table_owner", retention_sql::kTableOwner},
          {"retention.try_leader_lock", retention_sql::kTryLeaderLock},
          {"console.backlog_figures", console_sql::kBacklogFigures},
          {"console.completion_rates", console_sql::kCompletionRates},
          {"console.delivery_rate", console_sql::kDeliveryRate},
          {"console.recent_outbox_errors", console_sql::kRecentOutboxErrors},
          {"console.top_tenants", console_sql::kTopTenants},
          {"console.inbox_groups", console_sql::kInboxGroups},
          {"console.outbox_groups", console_sql::kOutboxGroups},
          {"console.inbox_group_page", console_sql::kInboxGroupPage},
          {"console.outbox_group_page", console_sql::kOutboxGroupPage},
          {"console.inbox_receipt", console_sql::kInboxReceipt},
          {"console.outbox_event", console_sql::kOutboxEvent},
          {"console.blocked_keys", console_sql::kBlockedKeys},
          {"console.recent_actions", console_sql::kRecentActions},
          {"console.record_action", console_sql::kRecordAction},
          {"health.xmin_holders", console_sql::kXminHolders},
          {"health.replication_slots", console_sql::kReplicationSlots},
          {"health.table_health", console_sql::kTableHealth},
          {"health.notify_queue", console_sql::kNotifyQueue},
          {"health.lock_waits", console_sql::kLockWaits}};
}

}  // namespace boxcar::detail

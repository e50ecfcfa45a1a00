// Retention: the one implementation behind `boxcar purge` and the janitor (SQL in
// retention_queries.hpp; rendering in operator_format.cpp).
#include <algorithm>
#include <limits>
#include <regex>

#include <spdlog/spdlog.h>

#include "boxcar/ops/retention.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "operator_support.hpp"
#include "retention_queries.hpp"

namespace boxcar {
namespace {

namespace sql = detail::retention_sql;

long long seconds_of(std::chrono::hours h) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(h).count());
}

// SET ROLE to the tables' owner for the run, RESET ROLE after it: partitions the run
// creates then belong to the owner, like outbox_events, and any member can drop them later.
class OwnerRole {
 public:
  OwnerRole(pqxx::connection& c, const std::string& schema) : c_(c) {
    pqxx::nontransaction statement(c_);
    const auto row = statement.exec_params1(detail::with_schema(sql::kTableOwner, schema));
    owner_ = row["owner"].as<std::string>();
    may_act_ = row["is_current"].as<bool>() || row["member"].as<bool>();
    if (row["is_current"].as<bool>() || !row["member"].as<bool>()) return;
    statement.exec("SET ROLE " + quote_identifier(row["owner"].as<std::string>()));
    switched_ = true;
  }
  ~OwnerRole() {
    if (!switched_) return;
    try {
      pqxx::nontransaction(c_).exec("RESET ROLE");
    } catch (...) {
      // The session is broken: its owner discards it.
    }
  }
  OwnerRole(const OwnerRole&) = delete;
  OwnerRole& operator=(const OwnerRole&) = delete;
  /// Whether the session is the owner or may become it.
  bool may_act() const { return may_act_; }
  const std::string& owner() const { return owner_; }

 private:
  pqxx::connection& c_;
  std::string owner_;
  bool may_act_ = false;
  bool switched_ = false;
};

// Written on a partition (COMMENT ON TABLE) before any DETACH of it, followed by its bound:
// a run that ends between the DETACH and the ATTACH or DROP after it (a crash, a lost
// session) leaves a table that is no partition and that no query of outbox_events reads,
// with events a publisher can then never see; the next run finds it by this mark
// (kOrphanedPartitions) and finishes the job. The comment goes with the table when it is
// dropped, and is cleared when it is attached again. Stored in the catalog: keep the text.
constexpr const char* kRetiringMark = "boxcar retention: detaching from outbox_events, ";

// A bound as pg_get_expr prints a partition of outbox_events (UUIDv7 ranges), the only text
// a mark may splice into ATTACH PARTITION.
bool is_partition_bound(const std::string& bound) {
  static const std::regex pattern(
      R"(FOR VALUES FROM \((MINVALUE|'[0-9a-f-]{36}')\) TO \((MAXVALUE|'[0-9a-f-]{36}')\))");
  return std::regex_match(bound, pattern);
}

struct Partition {
  std::string name;
  std::string bound;  // "FOR VALUES FROM (...) TO (...)", as ATTACH PARTITION takes it
  bool past_retention = false;
  bool detach_pending = false;
};

class Run {
 public:
  Run(pqxx::connection& c, const std::string& schema, const PurgeOptions& options, PurgeReport& report)
      : c_(c),
        schema_(schema),
        options_(options),
        report_(report),
        parent_(quote_identifier(schema) + ".outbox_events") {}

  void create_ahead() {
    if (options_.dry_run) return;
    pqxx::nontransaction statement(c_);
    report_.outbox_partitions_created =
        statement
            .exec_params1(detail::with_schema(sql::kCreatePartitions, schema_), options_.partitions_ahead)["created"]
            .as<std::int64_t>();
  }

  // Step 1: tables an interrupted run detached and did not attach again or drop. One that
  // still holds an unfinished event (or one finished within the retention) is attached
  // again with the bound its mark recorded; one whose events are all retirable is dropped,
  // as the run that detached it would have done.
  void recover_orphaned_partitions() {
    const long long cutoff = seconds_of(options_.outbox_retention);
    std::vector<Partition> orphans;
    {
      pqxx::nontransaction statement(c_);
      for (const auto& row :
           statement.exec_params(detail::with_schema(sql::kOrphanedPartitions, schema_), std::string(kRetiringMark)))
        orphans.push_back({.name = row["partition_name"].as<std::string>(), .bound = row["bound"].as<std::string>()});
    }
    for (const auto& p : orphans) {
      const std::string table = quote_identifier(schema_) + "." + quote_identifier(p.name);
      if (!is_partition_bound(p.bound)) {
        logger("retention")
            ->error("table {} carries a retention mark without a partition bound ('{}'); left as it is", p.name,
                    p.bound);
        continue;
      }
      const auto events = retirable(table, cutoff);
      if (events) {
        ++report_.outbox_partitions_retired;
        report_.outbox_deleted += *events;
        if (options_.dry_run) continue;
        exec("DROP TABLE " + table);
        logger("retention")
            ->info("retired outbox partition {} that an interrupted run detached ({} events)", p.name, *events);
        continue;
      }
      ++report_.outbox_partitions_reattached;
      if (options_.dry_run) continue;
      attach(p, table);
      logger("retention")
          ->warn("attached outbox partition {} again: an interrupted run had detached it with unfinished events",
                 p.name);
    }
  }

  void retire_old_partitions() {
    const long long cutoff = seconds_of(options_.outbox_retention);
    std::vector<Partition> partitions;
    {
      pqxx::nontransaction statement(c_);
      for (const auto& row : statement.exec_params(detail::with_schema(sql::kPartitions, schema_), cutoff))
        partitions.push_back({.name = row["partition_name"].as<std::string>(),
                              .bound = row["bound"].as<std::string>(),
                              .past_retention = row["past_retention"].as<bool>(),
                              .detach_pending = row["detach_pending"].as<bool>()});
    }
    // At most one partition of a table may be detach-pending: finish that one first.
    std::stable_partition(partitions.begin(), partitions.end(), [](const Partition& p) { return p.detach_pending; });
    for (const auto& p : partitions) {
      if (!p.past_retention && !p.detach_pending) continue;
      const std::string table = quote_identifier(schema_) + "." + quote_identifier(p.name);
      const auto events = retirable(table, cutoff);
      if (!events) {
        ++report_.outbox_partitions_blocked;
        if (p.detach_pending) reattach_after_finalize(p, table);
        continue;
      }
      if (options_.dry_run) {
        ++report_.outbox_partitions_retired;
        report_.outbox_deleted += *events;
        continue;
      }
      // CONCURRENTLY: two transactions, the second waits until no transaction can still
      // see the partition; emitters and publishers never wait for it. Interrupted (the
      // session died, a statement_timeout), it leaves the partition detach-pending:
      // FINALIZE completes it on the next run.
      mark(p, table);
      exec(std::string("ALTER TABLE ") + parent_ + " DETACH PARTITION " + table +
           (p.detach_pending ? " FINALIZE" : " CONCURRENTLY"));
      BOXCAR_FAILPOINT("retention.after_detach");
      // Between the check and the detach an operator may have requeued an event of it
      // (`dead retry` of a discarded one): check the detached table again, and give it
      // back rather than drop an unfinished event.
      const auto still = retirable(table, cutoff);
      if (!still) {
        attach(p, table);
        ++report_.outbox_partitions_blocked;
        continue;
      }
      exec("DROP TABLE " + table);
      ++report_.outbox_partitions_retired;
      report_.outbox_deleted += *still;
      logger("retention")->info("retired outbox partition {} ({} events)", p.name, *still);
    }
  }

  // Step 6 (retention.dead_hours): DEAD receipts, consumer by consumer, so each batch is a
  // range of inbox_receipts_dead.
  void purge_dead() {
    if (options_.dead_retention.count() == 0) return;
    const long long seconds = seconds_of(options_.dead_retention);
    pqxx::nontransaction statement(c_);
    if (options_.dry_run) {
      report_.inbox_dead_deleted =
          statement.exec_params1(detail::with_schema(sql::kPurgeDeadCount, schema_), seconds)["past_retention"]
              .as<std::int64_t>();
      return;
    }
    const auto batch =
        static_cast<long long>(std::min<std::size_t>(options_.batch_size, std::numeric_limits<int>::max()));
    const auto next_consumer = detail::with_schema(sql::kDeadConsumerAfter, schema_);
    const auto purge = detail::with_schema(sql::kPurgeDead, schema_);
    std::string consumer;
    while (true) {
      const auto next = statement.exec_params(next_consumer, consumer);
      if (next.empty()) break;
      consumer = next[0]["consumer"].as<std::string>();
      std::string after = "-infinity";
      while (true) {
        const auto row = statement.exec_params1(purge, consumer, seconds, batch, after);
        const auto n = row["deleted"].as<long long>();
        report_.inbox_dead_deleted += n;
        ++report_.inbox_batches;
        if (n < batch) break;
        after = row["newest"].as<std::string>();
      }
    }
  }

  void purge_inbox() {
    const long long seconds = seconds_of(options_.inbox_retention);
    pqxx::nontransaction statement(c_);
    if (options_.dry_run) {
      report_.inbox_deleted =
          statement.exec_params1(detail::with_schema(sql::kPurgeInboxCount, schema_), seconds)["past_retention"]
              .as<std::int64_t>();
      return;
    }
    const auto batch =
        static_cast<long long>(std::min<std::size_t>(options_.batch_size, std::numeric_limits<int>::max()));
    const auto text = detail::with_schema(sql::kPurgeInbox, schema_);
    // Each batch is an autocommit DELETE: locks are held for one batch only, and vacuum
    // can reclaim earlier batches while later ones run.
    while (true) {
      const auto n = static_cast<long long>(statement.exec_params(text, seconds, batch).affected_rows());
      report_.inbox_deleted += n;
      ++report_.inbox_batches;
      if (n < batch) break;
    }
  }

 private:
  std::optional<std::int64_t> retirable(const std::string& table, long long cutoff) {
    pqxx::nontransaction statement(c_);
    const auto field =
        statement.exec_params1(detail::with_schema(sql::kPartitionRetirable, schema_), table, cutoff)["events"];
    if (field.is_null()) return std::nullopt;
    return field.as<std::int64_t>();
  }

  // A detach-pending partition that is no longer retirable: finish the detach (nothing
  // else can be done with it) and attach it again, so its events stay published.
  void reattach_after_finalize(const Partition& p, const std::string& table) {
    if (options_.dry_run) return;
    mark(p, table);
    exec("ALTER TABLE " + parent_ + " DETACH PARTITION " + table + " FINALIZE");
    BOXCAR_FAILPOINT("retention.after_detach");
    attach(p, table);
  }

  // Before any DETACH: the mark a later run recovers the table by (kRetiringMark). A
  // catalog write under SHARE UPDATE EXCLUSIVE on the partition: emitters and publishers
  // go on.
  void mark(const Partition& p, const std::string& table) {
    pqxx::nontransaction statement(c_);
    statement.exec("COMMENT ON TABLE " + table + " IS " + statement.quote(std::string(kRetiringMark) + p.bound));
  }

  // ATTACH with the bound it had, then the mark goes: the table is a partition again. The
  // CHECK constraint DETACH ... CONCURRENTLY and FINALIZE leave on the table implies the
  // bound, so ATTACH does not scan it; its indexes are those of a partition already.
  void attach(const Partition& p, const std::string& table) {
    exec("ALTER TABLE " + parent_ + " ATTACH PARTITION " + table + " " + p.bound);
    exec("COMMENT ON TABLE " + table + " IS NULL");
  }

  void exec(const std::string& ddl) { pqxx::nontransaction(c_).exec(ddl); }

  pqxx::connection& c_;
  const std::string& schema_;
  const PurgeOptions& options_;
  PurgeReport& report_;
  std::string parent_;
};

void check_options(const PurgeOptions& options) {
  if (options.inbox_retention.count() < 0 || options.outbox_retention.count() < 0 || options.dead_retention.count() < 0)
    throw OperatorError("PURGE_INVALID", "retention must not be negative");
  if (options.batch_size == 0) throw OperatorError("PURGE_INVALID", "batch_size must be at least 1");
  if (options.partitions_ahead < 1) throw OperatorError("PURGE_INVALID", "partitions_ahead must be at least 1");
  validate_retention(options);
}

}  // namespace

void validate_retention(const PurgeOptions& options, const std::string& inbox_field, const std::string& horizon_field,
                        const std::string& dead_field) {
  if (options.inbox_retention.count() < 0) throw ConfigError(inbox_field, "must not be negative");
  if (options.redelivery_horizon.count() < 0) throw ConfigError(horizon_field, "must not be negative");
  if (options.dead_retention.count() < 0) throw ConfigError(dead_field, "must not be negative (0 keeps DEAD receipts)");
  if (options.dead_retention.count() > 0 && options.dead_retention < options.redelivery_horizon)
    throw ConfigError(dead_field, "the DEAD retention (" + std::to_string(options.dead_retention.count()) +
                                      " h) is shorter than " + horizon_field + " (" +
                                      std::to_string(options.redelivery_horizon.count()) +
                                      " h): a redelivery after its DEAD receipt is purged would be accepted as new "
                                      "and handled again; keep " +
                                      dead_field + " at least " + horizon_field + ", or 0 to keep DEAD receipts");
  if (options.inbox_retention < options.redelivery_horizon)
    throw ConfigError(inbox_field, "the inbox retention (" + std::to_string(options.inbox_retention.count()) +
                                       " h) is shorter than " + horizon_field + " (" +
                                       std::to_string(options.redelivery_horizon.count()) +
                                       " h): a redelivery after its receipt is purged would be accepted as new and "
                                       "handled again; keep " +
                                       inbox_field + " at least " + horizon_field);
}

PurgeReport run_retention(pqxx::connection& session, const std::string& schema, const PurgeOptions& options) {
  check_options(options);
  const std::string checked = validate_schema_name(schema);
  PurgeReport report{.dry_run = options.dry_run};
  {
    OwnerRole owner(session, checked);
    Run run(session, checked, options, report);
    if (owner.may_act()) {
      run.recover_orphaned_partitions();
      run.create_ahead();
      run.retire_old_partitions();
    } else {
      // A runtime role (the operator's) may delete receipts but not create or drop tables.
      report.outbox_skipped = "creating and retiring outbox partitions needs the owner of outbox_events (" +
                              owner.owner() + ") or a member of that role; this session is neither";
      logger("retention")->warn("retention of schema {}: {}", checked, report.outbox_skipped);
    }
    run.purge_inbox();
    run.purge_dead();
  }
  logger("retention")
      ->info(
          "retention dry_run={} inbox_deleted={} inbox_dead_deleted={} inbox_batches={} outbox_partitions_created={} "
          "outbox_partitions_retired={} outbox_partitions_blocked={} outbox_partitions_reattached={} "
          "outbox_deleted={} inbox_retention={}h dead_retention={}h outbox_retention={}h batch_size={}",
          options.dry_run, report.inbox_deleted, report.inbox_dead_deleted, report.inbox_batches,
          report.outbox_partitions_created, report.outbox_partitions_retired, report.outbox_partitions_blocked,
          report.outbox_partitions_reattached, report.outbox_deleted, options.inbox_retention.count(),
          options.dead_retention.count(), options.outbox_retention.count(), options.batch_size);
  return report;
}

PurgeReport purge(ConnectionPool& pool, const std::string& schema, const PurgeOptions& options) {
  check_options(options);
  const char* doing = options.dry_run ? "purge (dry run)" : "purge";
  // Closed when the run ends: whatever the run left on it (a role, after a failure) goes
  // with it.
  std::unique_ptr<pqxx::connection> session;
  try {
    session = detail::open_connection(pool.session_connection_string());
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), doing, false);  // nothing ran
  }
  try {
    return run_retention(*session, schema, options);
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), doing, !options.dry_run);
  }
}

}  // namespace boxcar

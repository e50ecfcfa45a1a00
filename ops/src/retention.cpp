// Retention: the one implementation behind `boxcar purge` and the janitor (SQL in
// retention_queries.hpp; rendering in operator_format.cpp).
#include <algorithm>
#include <limits>

#include <spdlog/spdlog.h>

#include "boxcar/ops/retention.hpp"
#include "boxcar/core/detail/database_errors.hpp"
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
      exec(std::string("ALTER TABLE ") + parent_ + " DETACH PARTITION " + table +
           (p.detach_pending ? " FINALIZE" : " CONCURRENTLY"));
      // Between the check and the detach an operator may have requeued an event of it
      // (`dead retry` of a discarded one): check the detached table again, and give it
      // back rather than drop an unfinished event.
      const auto still = retirable(table, cutoff);
      if (!still) {
        exec("ALTER TABLE " + parent_ + " ATTACH PARTITION " + table + " " + p.bound);
        ++report_.outbox_partitions_blocked;
        continue;
      }
      exec("DROP TABLE " + table);
      ++report_.outbox_partitions_retired;
      report_.outbox_deleted += *still;
      logger("retention")->info("retired outbox partition {} ({} events)", p.name, *still);
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
    exec("ALTER TABLE " + parent_ + " DETACH PARTITION " + table + " FINALIZE");
    exec("ALTER TABLE " + parent_ + " ATTACH PARTITION " + table + " " + p.bound);
  }

  void exec(const std::string& ddl) { pqxx::nontransaction(c_).exec(ddl); }

  pqxx::connection& c_;
  const std::string& schema_;
  const PurgeOptions& options_;
  PurgeReport& report_;
  std::string parent_;
};

void check_options(const PurgeOptions& options) {
  if (options.inbox_retention.count() < 0 || options.outbox_retention.count() < 0)
    throw OperatorError("PURGE_INVALID", "retention must not be negative");
  if (options.batch_size == 0) throw OperatorError("PURGE_INVALID", "batch_size must be at least 1");
  if (options.partitions_ahead < 1) throw OperatorError("PURGE_INVALID", "partitions_ahead must be at least 1");
  validate_retention(options);
}

}  // namespace

void validate_retention(const PurgeOptions& options, const std::string& inbox_field, const std::string& horizon_field) {
  if (options.inbox_retention.count() < 0) throw ConfigError(inbox_field, "must not be negative");
  if (options.redelivery_horizon.count() < 0) throw ConfigError(horizon_field, "must not be negative");
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
      run.create_ahead();
      run.retire_old_partitions();
    } else {
      // A runtime role (the operator's) may delete receipts but not create or drop tables.
      report.outbox_skipped = "creating and retiring outbox partitions needs the owner of outbox_events (" +
                              owner.owner() + ") or a member of that role; this session is neither";
      logger("retention")->warn("retention of schema {}: {}", checked, report.outbox_skipped);
    }
    run.purge_inbox();
  }
  logger("retention")
      ->info(
          "retention dry_run={} inbox_deleted={} inbox_batches={} outbox_partitions_created={} "
          "outbox_partitions_retired={} outbox_partitions_blocked={} outbox_deleted={} inbox_retention={}h "
          "outbox_retention={}h batch_size={}",
          options.dry_run, report.inbox_deleted, report.inbox_batches, report.outbox_partitions_created,
          report.outbox_partitions_retired, report.outbox_partitions_blocked, report.outbox_deleted,
          options.inbox_retention.count(), options.outbox_retention.count(), options.batch_size);
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

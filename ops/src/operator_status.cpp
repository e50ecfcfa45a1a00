// `boxcar status`: exact counts of receipts and events by status (SQL in
// operator_queries.hpp; rendering in operator_format.cpp).
#include <algorithm>
#include <map>
#include <utility>

#include "boxcar/ops/status.hpp"
#include "operator_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {

StatusReport status(ConnectionPool& pool, const std::string& schema,
                    const std::vector<std::string>& declared_consumers) {
  const std::string inbox_sql = detail::operator_statement(detail::operator_sql::kInboxStatus, schema);
  const std::string outbox_sql = detail::operator_statement(detail::operator_sql::kOutboxStatus, schema);

  StatusReport report{.schema = schema};
  std::map<std::string, InboxConsumerStatus> consumers;
  for (const auto& name : declared_consumers) consumers[name] = {.consumer = name, .declared = true};

  detail::with_operator_connection(pool, "status", false, [&](pqxx::connection& c) {
    // One snapshot for both tables (and the blocked keys), so a message moving between them
    // is counted once.
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c);
    for (const auto& row : tx.exec(inbox_sql)) {
      const auto name = row["consumer"].as<std::string>();
      auto& entry = consumers[name];
      entry.consumer = name;
      const auto status = row["status"].as<std::string>();
      const auto live = row["live"].as<std::int64_t>();
      if (status == "PENDING")
        entry.pending += live;
      else if (status == "PROCESSING")
        entry.processing += live;
      else if (status == "RETRYABLE")
        entry.retryable += live;
      else if (status == "COMPLETED")
        entry.completed += live;
      else if (status == "DEAD")
        entry.dead += live;
      else if (status == "WAITING")
        entry.waiting += live;
      entry.discarded += row["discarded"].as<std::int64_t>();
      entry.oldest_due_age =
          std::max(entry.oldest_due_age, std::chrono::milliseconds(row["oldest_due_age_ms"].as<std::int64_t>()));
    }
    auto& out = report.outbox;
    for (const auto& row : tx.exec(outbox_sql)) {
      const auto status = row["status"].as<std::string>();
      const auto live = row["live"].as<std::int64_t>();
      if (status == "PENDING")
        out.pending += live;
      else if (status == "WAITING")
        out.waiting += live;
      else if (status == "PUBLISHING")
        out.publishing += live;
      else if (status == "RETRYABLE")
        out.retryable += live;
      else if (status == "PUBLISHED")
        out.published += live;
      else if (status == "DEAD")
        out.dead += live;
      out.discarded += row["discarded"].as<std::int64_t>();
      out.oldest_unpublished_age = std::max(
          out.oldest_unpublished_age, std::chrono::milliseconds(row["oldest_unpublished_age_ms"].as<std::int64_t>()));
    }
    report.blocked_keys = detail::read_blocked_keys(tx, schema, 100);
    const auto holders = detail::read_xmin_holders(tx, 1);
    if (!holders.empty()) report.xmin_holder = holders.front();
    tx.commit();
  });
  for (auto& [name, entry] : consumers) report.inbox.push_back(std::move(entry));
  return report;
}

}  // namespace boxcar

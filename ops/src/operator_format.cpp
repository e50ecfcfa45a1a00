// Human-readable tables and JSON documents for the operator commands' results.
// JSON keys are snake_case and stable (scripts parse them); tables are for people and
// may change.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "boxcar/ops/operator.hpp"
#include "operator_support.hpp"

namespace boxcar {
namespace detail {

// RFC 3339 UTC; `millis` adds ".mmm" (JSON keeps them, tables do not need them).
std::string format_time(Timestamp t, bool millis) {
  const auto since_epoch = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  auto seconds = static_cast<std::time_t>(since_epoch / 1000);
  auto ms = since_epoch % 1000;
  if (ms < 0) {
    ms += 1000;
    --seconds;
  }
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[40];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  std::string out = buffer;
  if (millis) {
    char fraction[8];
    std::snprintf(fraction, sizeof fraction, ".%03d", static_cast<int>(ms));
    out += fraction;
  }
  return out + 'Z';
}

nlohmann::json time_json(const std::optional<Timestamp>& t) {
  return t ? nlohmann::json(format_time(*t, true)) : nlohmann::json(nullptr);
}

}  // namespace detail

namespace {

using detail::format_time;
using detail::time_json;

// "0s", "42s", "5m07s", "3h04m", "2d03h": an age at a glance.
std::string format_age(std::chrono::milliseconds age) {
  const long long s = age.count() / 1000;
  char buffer[32];
  if (s < 60)
    std::snprintf(buffer, sizeof buffer, "%llds", s);
  else if (s < 3600)
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    std::snprintf(buffer, sizeof buffer, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buffer;
}

double seconds(std::chrono::milliseconds age) { return static_cast<double>(age.count()) / 1000.0; }

std::string join(const std::vector<std::string>& items, const char* separator = ",") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// One line of text, at most `width` characters (errors can be long and multi-line).
std::string clip(std::string text, std::size_t width) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > width) text = text.substr(0, width - 3) + "...";
  return text;
}

// Columns padded to their widest cell; columns from `first_numeric` on align right.
std::string render(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                   std::size_t first_numeric) {
  std::vector<std::size_t> widths(header.size(), 0);
  const auto measure = [&widths](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  const auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - cell.size(), ' ');
      if (i > 0) text += "  ";
      text += i >= first_numeric ? pad + cell : cell + pad;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + '\n';
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string n(std::int64_t value) { return std::to_string(value); }

}  // namespace

// ---------------------------------------------------------------------------------------
// status

std::string to_table(const StatusReport& report) {
  // "(undeclared)" only means something when the caller declared its consumers.
  const bool any_declared =
      std::any_of(report.inbox.begin(), report.inbox.end(), [](const auto& c) { return c.declared; });
  std::vector<std::vector<std::string>> inbox;
  for (const auto& c : report.inbox)
    inbox.push_back({c.consumer + (c.declared || !any_declared ? "" : " (undeclared)"), n(c.pending), n(c.processing),
                     n(c.retryable), n(c.waiting), n(c.completed), n(c.dead), n(c.discarded),
                     format_age(c.oldest_due_age)});
  const auto& o = report.outbox;
  std::string out = "schema " + report.schema + "\n\nINBOX\n";
  out += inbox.empty() ? "(no consumers)\n"
                       : render({"CONSUMER", "PENDING", "PROCESSING", "RETRYABLE", "WAITING", "COMPLETED", "DEAD",
                                 "DISCARDED", "OLDEST DUE"},
                                inbox, 1);
  if (!report.blocked_keys.empty()) {
    std::vector<std::vector<std::string>> blocked;
    for (const auto& k : report.blocked_keys)
      blocked.push_back({k.consumer, to_string(k.scope), k.key, std::to_string(k.head_id), k.head_status,
                         std::to_string(k.head_attempts),
                         k.waiting > kBlockedKeyWaitingCap ? ">" + n(kBlockedKeyWaitingCap) : n(k.waiting),
                         format_age(k.blocked_for), k.head_error_type});
    out +=
        "\nBLOCKED KEYS (each held by its head receipt; boxcar dead unblock KEY --scope SCOPE releases a DEAD one)\n";
    out += render({"CONSUMER", "SCOPE", "KEY", "RECEIPT", "STATUS", "ATTEMPTS", "WAITING", "BLOCKED FOR", "ERROR TYPE"},
                  blocked, 99);
  }
  out += "\nOUTBOX\n";
  out +=
      render({"PENDING", "WAITING", "PUBLISHING", "RETRYABLE", "PUBLISHED", "DEAD", "DISCARDED", "OLDEST UNPUBLISHED"},
             {{n(o.pending), n(o.waiting), n(o.publishing), n(o.retryable), n(o.published), n(o.dead), n(o.discarded),
               format_age(o.oldest_unpublished_age)}},
             0);
  if (report.xmin_holder) {
    const auto& h = *report.xmin_holder;
    out += "\nXMIN HORIZON (held back by this session: VACUUM keeps every row finished after its snapshot)\n";
    out += render({"PID", "APPLICATION", "USER", "STATE", "XMIN AGE", "TRANSACTION AGE", "QUERY START"},
                  {{std::to_string(h.pid), h.application_name.empty() ? "-" : h.application_name,
                    h.user.empty() ? "-" : h.user, h.state.empty() ? "-" : h.state, n(h.xmin_age),
                    format_age(h.transaction_age), h.query_start ? format_time(*h.query_start, false) : "-"}},
                  4);
  }
  return out;
}

nlohmann::json to_json(const StatusReport& report) {
  auto consumers = nlohmann::json::array();
  InboxConsumerStatus total;
  for (const auto& c : report.inbox) {
    consumers.push_back({{"consumer", c.consumer},
                         {"declared", c.declared},
                         {"pending", c.pending},
                         {"processing", c.processing},
                         {"retryable", c.retryable},
                         {"completed", c.completed},
                         {"waiting", c.waiting},
                         {"dead", c.dead},
                         {"discarded", c.discarded},
                         {"oldest_due_age_seconds", seconds(c.oldest_due_age)}});
    total.pending += c.pending;
    total.processing += c.processing;
    total.retryable += c.retryable;
    total.completed += c.completed;
    total.waiting += c.waiting;
    total.dead += c.dead;
    total.discarded += c.discarded;
    total.oldest_due_age = std::max(total.oldest_due_age, c.oldest_due_age);
  }
  auto blocked = nlohmann::json::array();
  for (const auto& k : report.blocked_keys)
    blocked.push_back({{"consumer", k.consumer},
                       {"scope", to_string(k.scope)},
                       {"key", k.key},
                       {"receipt_id", k.head_id},
                       {"status", k.head_status},
                       {"attempts", k.head_attempts},
                       {"error_type", k.head_error_type},
                       {"error", k.head_error},
                       {"waiting", k.waiting},
                       {"blocked_seconds", seconds(k.blocked_for)}});
  const auto& o = report.outbox;
  return {{"format_version", kStatusFormatVersion},
          {"schema", report.schema},
          {"blocked_keys", blocked},
          {"xmin_holder", report.xmin_holder ? to_json(*report.xmin_holder) : nlohmann::json(nullptr)},
          {"inbox",
           {{"consumers", consumers},
            {"totals",
             {{"pending", total.pending},
              {"processing", total.processing},
              {"retryable", total.retryable},
              {"completed", total.completed},
              {"waiting", total.waiting},
              {"dead", total.dead},
              {"discarded", total.discarded},
              {"oldest_due_age_seconds", seconds(total.oldest_due_age)}}}}},
          {"outbox",
           {{"pending", o.pending},
            {"waiting", o.waiting},
            {"publishing", o.publishing},
            {"retryable", o.retryable},
            {"published", o.published},
            {"dead", o.dead},
            {"discarded", o.discarded},
            {"oldest_unpublished_age_seconds", seconds(o.oldest_unpublished_age)}}}};
}

// ---------------------------------------------------------------------------------------
// dead records

std::string to_table(const std::vector<DeadRecord>& records) {
  if (records.empty()) return "(no DEAD records match)\n";
  const bool inbox = records.front().kind == RecordKind::Inbox;
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : records)
    rows.push_back({n(r.id), inbox ? r.consumer : r.topic, inbox ? r.message_id : r.event_id, r.event_type,
                    n(r.attempts), n(r.replay_count), r.dead_reason, format_time(r.updated_at, false), r.group,
                    clip(r.failure, 80)});
  return render({"ID", inbox ? "CONSUMER" : "TOPIC", inbox ? "MESSAGE ID" : "EVENT ID", "EVENT TYPE", "ATTEMPTS",
                 "REPLAYS", "REASON", "DIED AT", "GROUP", "FAILURE"},
                rows, 99);
}

std::string to_table(const std::vector<DeadGroup>& groups) {
  if (groups.empty()) return "(no DEAD records match)\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : groups)
    rows.push_back({g.group, n(g.count), format_time(g.first_seen, false), format_time(g.last_seen, false),
                    join(g.consumers.empty() ? g.topics : g.consumers), join(g.event_types), clip(g.failure, 100)});
  return render({"GROUP", "COUNT", "FIRST SEEN", "LAST SEEN", "CONSUMERS/TOPICS", "EVENT TYPES", "FAILURE"}, rows, 99);
}

std::string to_table(const DeadRecord& r) {
  std::vector<std::pair<std::string, std::string>> fields;
  fields.emplace_back("kind", to_string(r.kind));
  fields.emplace_back("id", n(r.id));
  if (r.kind == RecordKind::Inbox) {
    fields.emplace_back("scope", r.scope_kind + (r.scope_id.empty() ? "" : ":" + r.scope_id));
    fields.emplace_back("source", r.source);
    fields.emplace_back("consumer", r.consumer);
    fields.emplace_back("message_id", r.message_id);
  } else {
    fields.emplace_back("event_id", r.event_id);
    fields.emplace_back("tenant", r.scope_kind + (r.scope_id.empty() ? "" : ":" + r.scope_id));
    fields.emplace_back("topic", r.topic);
    fields.emplace_back("message_key", r.message_key);
  }
  fields.emplace_back("event_type", r.event_type + " v" + std::to_string(r.schema_version));
  fields.emplace_back("attempts", n(r.attempts));
  fields.emplace_back("dead_reason", r.dead_reason);
  if (!r.last_error_type.empty()) fields.emplace_back("last_error_type", r.last_error_type);
  fields.emplace_back("last_error", r.last_error);
  fields.emplace_back("failure", r.failure);
  fields.emplace_back("group", r.group);
  fields.emplace_back("created_at", format_time(r.created_at, true));
  fields.emplace_back("updated_at", format_time(r.updated_at, true));
  fields.emplace_back("replay_count", n(r.replay_count));
  if (r.last_replayed_at)
    fields.emplace_back("last_replayed", format_time(*r.last_replayed_at, true) + " by " + r.last_replayed_by);
  if (r.discarded_at) fields.emplace_back("discarded", format_time(*r.discarded_at, true) + " by " + r.discarded_by);
  if (!r.content_fingerprint.empty()) fields.emplace_back("fingerprint", r.content_fingerprint);
  std::size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  std::string out;
  for (const auto& [key, value] : fields) out += key + ":" + std::string(width - key.size() + 1, ' ') + value + '\n';
  if (!r.payload.is_null()) out += "payload:\n" + r.payload.dump(2) + '\n';
  if (!r.metadata.is_null())
    out += (r.kind == RecordKind::Inbox ? "metadata:\n" : "headers:\n") + r.metadata.dump(2) + '\n';
  return out;
}

nlohmann::json to_json(const DeadRecord& r) {
  nlohmann::json j = {
      {"kind", to_string(r.kind)},
      {"id", r.id},
      {"event_type", r.event_type},
      {"schema_version", r.schema_version},
      {"attempts", r.attempts},
      {"dead_reason", r.dead_reason},
      {"last_error", r.last_error},
      {"failure", r.failure},
      {"group", r.group},
      {"created_at", format_time(r.created_at, true)},
      {"updated_at", format_time(r.updated_at, true)},
      {"replay_count", r.replay_count},
      {"last_replayed_at", time_json(r.last_replayed_at)},
      {"last_replayed_by", r.last_replayed_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.last_replayed_by)},
      {"discarded_at", time_json(r.discarded_at)},
      {"discarded_by", r.discarded_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.discarded_by)}};
  if (r.kind == RecordKind::Inbox) {
    j["scope_kind"] = r.scope_kind;
    j["scope_id"] = r.scope_id;
    j["source"] = r.source;
    j["consumer"] = r.consumer;
    j["message_id"] = r.message_id;
    j["last_error_type"] = r.last_error_type;
  } else {
    j["tenant_scope"] = r.scope_kind;
    j["tenant_id"] = r.scope_id;
    j["event_id"] = r.event_id;
    j["topic"] = r.topic;
    j["message_key"] = r.message_key;
  }
  // Present only for dead_show(): a list stays small and free of payload data.
  if (!r.payload.is_null() || !r.metadata.is_null()) {
    if (!r.content_fingerprint.empty()) j["fingerprint"] = r.content_fingerprint;
    j["payload"] = r.payload;
    j[r.kind == RecordKind::Inbox ? "metadata" : "headers"] = r.metadata;
  }
  return j;
}

nlohmann::json to_json(const std::vector<DeadRecord>& records) {
  auto out = nlohmann::json::array();
  for (const auto& r : records) out.push_back(to_json(r));
  return out;
}

nlohmann::json to_json(const std::vector<DeadGroup>& groups) {
  auto out = nlohmann::json::array();
  for (const auto& g : groups) {
    out.push_back({{"group", g.group},
                   {"failure", g.failure},
                   {"count", g.count},
                   {"first_seen", format_time(g.first_seen, true)},
                   {"last_seen", format_time(g.last_seen, true)},
                   {"consumers", g.consumers},
                   {"event_types", g.event_types},
                   {"topics", g.topics},
                   {"dead_reasons", g.dead_reasons}});
  }
  return out;
}

nlohmann::json dead_list_document(RecordKind kind, const std::vector<DeadRecord>& records) {
  return {{"format_version", kDeadListFormatVersion}, {"kind", to_string(kind)}, {"records", to_json(records)}};
}

nlohmann::json dead_list_document(RecordKind kind, const std::vector<DeadGroup>& groups) {
  return {{"format_version", kDeadListFormatVersion}, {"kind", to_string(kind)}, {"groups", to_json(groups)}};
}

nlohmann::json to_json(const ActionResult& result) {
  return {{"action", result.action},   {"kind", to_string(result.kind)},
          {"dry_run", result.dry_run}, {"count", result.ids.size()},
          {"ids", result.ids},         {"limit_reached", result.limit_reached}};
}

// ---------------------------------------------------------------------------------------
// purge

nlohmann::json to_json(const PurgeReport& report) {
  return {{"dry_run", report.dry_run},
          {"inbox_deleted", report.inbox_deleted},
          {"inbox_dead_deleted", report.inbox_dead_deleted},
          {"inbox_batches", report.inbox_batches},
          {"outbox_deleted", report.outbox_deleted},
          {"outbox_partitions_created", report.outbox_partitions_created},
          {"outbox_partitions_retired", report.outbox_partitions_retired},
          {"outbox_partitions_blocked", report.outbox_partitions_blocked},
          {"outbox_partitions_reattached", report.outbox_partitions_reattached},
          {"outbox_skipped", report.outbox_skipped}};
}

std::string to_table(const PurgeReport& report) {
  std::ostringstream out;
  out << "inbox:  " << (report.dry_run ? "would delete " : "deleted ") << report.inbox_deleted
      << " COMPLETED receipts and " << report.inbox_dead_deleted << " DEAD";
  if (!report.dry_run) out << " in " << report.inbox_batches << " batches";
  out << "\noutbox: " << (report.dry_run ? "would retire " : "retired ") << report.outbox_partitions_retired
      << " partitions (" << report.outbox_deleted << " finished events)";
  if (!report.dry_run) out << ", created " << report.outbox_partitions_created << " ahead";
  out << "; " << report.outbox_partitions_blocked << " past retention kept for an unfinished event";
  if (report.outbox_partitions_reattached > 0)
    out << "; " << (report.dry_run ? "would attach again " : "attached again ") << report.outbox_partitions_reattached
        << " that an interrupted run had detached with an unfinished event";
  out << '\n';
  if (!report.outbox_skipped.empty()) out << "outbox: skipped: " << report.outbox_skipped << '\n';
  return out.str();
}

}  // namespace boxcar

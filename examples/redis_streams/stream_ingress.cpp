// StreamIngress: Redis Streams entries -> Inbox::accept_many -> XACK / dead letter.
#include "stream_ingress.hpp"

#include <cctype>
#include <charconv>
#include <stdexcept>
#include <map>
#include <thread>

#include "boxcar/inbox/errors.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/logging.hpp"

namespace redis_streams {

using namespace std::chrono_literals;

namespace {

spdlog::logger& log() {
  static const auto logger = boxcar::logger("redis_ingress");
  return *logger;
}

/// Entries of one stream from an XREADGROUP / XAUTOCLAIM entry list: [[id, [f, v, ...]], ...].
std::vector<StreamEntry> parse_entries(const RedisValue& list) {
  std::vector<StreamEntry> entries;
  for (const RedisValue& item : list.elements) {
    if (item.elements.size() < 2) continue;
    StreamEntry entry{.id = item.elements[0].str};
    const RedisValue& fields = item.elements[1];
    if (fields.is_nil()) {
      entry.deleted = true;
    } else {
      for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2)
        entry.fields.emplace_back(fields.elements[i].str, fields.elements[i + 1].str);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

MappedEntry rejected(std::string code, std::string field, std::string message) {
  return MappedEntry{
      .error_code = std::move(code), .error_field = std::move(field), .error_message = std::move(message)};
}

/// Sleeps up to `delay`, waking early when `stop` is set.
void pause(std::chrono::milliseconds delay, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (!stop.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
}

}  // namespace

IngressStats& IngressStats::operator+=(const IngressStats& other) {
  read += other.read;
  accepted += other.accepted;
  duplicates += other.duplicates;
  dead_lettered += other.dead_lettered;
  storage_failures += other.storage_failures;
  return *this;
}

namespace {
bool valid_tenant(const std::string& tenant) {
  if (tenant.empty()) return false;
  for (const char c : tenant)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}
}  // namespace

std::string tenant_stream(const std::string& prefix, const std::string& tenant) {
  if (!valid_tenant(tenant))
    throw std::invalid_argument("tenant '" + tenant + "': only letters, digits, '_' and '-' are allowed");
  return prefix + ":" + tenant;
}

std::string IngressOptions::tenant() const {
  const std::string head = stream_prefix + ":";
  const std::string tenant = stream.starts_with(head) ? stream.substr(head.size()) : std::string();
  if (!valid_tenant(tenant))
    throw std::invalid_argument("stream '" + stream + "' is not " + head + "<tenant> (letters, digits, '_', '-')");
  return tenant;
}

std::string entry_field_of(const std::string& inbox_field) {
  static const std::map<std::string, std::string> kNames = {
      {"message_id", "id"},
      {"event_type", "type"},
      {"schema_version", "version"},
      {"scope.id", "tenant"},
      {"metadata/traceparent", "traceparent"},
      {"metadata/tracestate", "tracestate"},
      {"metadata/correlationId", "correlation_id"},
      {"metadata/causationId", "causation_id"},
  };
  if (const auto it = kNames.find(inbox_field); it != kNames.end()) return it->second;
  if (inbox_field.starts_with("payload")) return "data" + inbox_field.substr(7);
  return inbox_field;  // "source", "consumer": configuration, not the entry
}

MappedEntry map_entry(const StreamEntry& entry, const IngressOptions& options) {
  if (entry.deleted) return rejected("STREAM_ENTRY_DELETED", "", "the entry was deleted from the stream while pending");

  std::map<std::string, std::string> fields;
  for (const auto& [name, value] : entry.fields) {
    // XADD allows a field twice; which one the producer meant is ambiguous.
    if (!fields.emplace(name, value).second)
      return rejected("STREAM_FIELD_REPEATED", name, "the field occurs more than once");
  }
  const auto field = [&](const char* name) {
    const auto it = fields.find(name);
    return it == fields.end() ? std::string{} : it->second;
  };

  // The tenant is whose stream this is: only that tenant's ACL user may XADD to it.
  // Entries never choose it; one that names another tenant is a bug or a forgery.
  const std::string tenant = options.tenant();
  if (fields.contains("tenant") && fields.at("tenant") != tenant)
    return rejected("TENANT_MISMATCH", "tenant", "the entry names another tenant than its stream " + options.stream);

  boxcar::AcceptRequest request{
      .scope = boxcar::Scope::tenant(tenant),
      .source = options.source,
      .consumer = options.consumer,
      .message_id = field("id"),
      .event_type = field("type"),
      .metadata = {.traceparent = field("traceparent"),
                   .tracestate = field("tracestate"),
                   .correlation_id = field("correlation_id"),
                   .causation_id = field("causation_id")},
  };

  // version: a decimal integer; anything else is left 0, which the inbox rejects as
  // INBOX_SCHEMA_VERSION_INVALID (reported on "version").
  const std::string version = field("version");
  int parsed = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), parsed);
  if (ec == std::errc{} && end == version.data() + version.size()) request.schema_version = parsed;

  if (!fields.contains("data")) return rejected("INBOX_FIELD_REQUIRED", "data", "the JSON payload is missing");
  try {
    // Strict parsing first (duplicate keys, unsafe integers, bad UTF-8 are errors, not
    // silently resolved), then the canonical text into a json value for the request.
    request.payload = nlohmann::json::parse(boxcar::canonicalize_text(fields.at("data")));
  } catch (const boxcar::JsonValueError& e) {
    return rejected(e.code(), "data" + e.path(), e.what());
  }
  return MappedEntry{.request = std::move(request)};
}

StreamIngress::StreamIngress(boxcar::Inbox& inbox, RedisOptions redis, IngressOptions options)
    : inbox_(inbox), redis_options_(std::move(redis)), options_(std::move(options)) {
  options_.tenant();  // fail at construction, not on the first entry
}

StreamIngress::~StreamIngress() = default;

RedisClient& StreamIngress::redis() {
  if (!client_) client_ = std::make_unique<RedisClient>(redis_options_);
  return *client_;
}

void StreamIngress::ensure_group() {
  const RedisValue reply = redis().command({"XGROUP", "CREATE", options_.stream, options_.group, "$", "MKSTREAM"});
  if (reply.is_error() && !reply.str.starts_with("BUSYGROUP"))
    throw RedisCommandError("redis: XGROUP CREATE: " + reply.str);
}

std::vector<StreamEntry> StreamIngress::xreadgroup(const std::string& from, std::chrono::milliseconds block) {
  std::vector<std::string> args = {"XREADGROUP",           "GROUP", options_.group,
                                   options_.consumer_name, "COUNT", std::to_string(options_.batch_size)};
  if (block > 0ms) {
    args.push_back("BLOCK");
    args.push_back(std::to_string(block.count()));
  }
  args.insert(args.end(), {"STREAMS", options_.stream, from});
  // The socket must outwait the server-side BLOCK.
  const RedisValue reply = redis().call(args, block + redis_options_.timeout);
  // nil: nothing new (or BLOCK timed out); else [[stream, entries]].
  if (reply.is_nil() || reply.elements.empty() || reply.elements[0].elements.size() < 2) return {};
  return parse_entries(reply.elements[0].elements[1]);
}

IngressStats StreamIngress::process(const std::vector<StreamEntry>& entries) {
  IngressStats stats{.read = entries.size()};
  if (entries.empty()) return stats;

  std::vector<MappedEntry> mapped;
  std::vector<boxcar::AcceptRequest> batch;
  std::vector<std::size_t> batch_index(entries.size(), SIZE_MAX);
  mapped.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    mapped.push_back(map_entry(entries[i], options_));
    if (mapped.back().request) {
      batch_index[i] = batch.size();
      batch.push_back(*mapped.back().request);
    }
  }

  std::vector<boxcar::AcceptResult> results;
  try {
    results = inbox_.accept_many(batch);  // one transaction for the whole read batch
  } catch (const boxcar::InboxStorageError& e) {
    // Nothing is acknowledged, not even entries that were invalid anyway: the batch is
    // retried as a whole, and the redelivery reconciles an uncertain commit.
    boxcar::log_event(log(), boxcar::LogLevel::Warn, "batch not stored; leaving it pending",
                      {{"stream", options_.stream},
                       {"entries", std::to_string(entries.size())},
                       {"code", e.code()},
                       {"error", e.what()}});
    stats.storage_failures = 1;
    return stats;
  }

  struct DeadLetter {
    const StreamEntry* entry;
    std::string code, field, message;
  };
  std::vector<std::string> ack_ids;
  std::vector<DeadLetter> dead;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    ack_ids.push_back(entries[i].id);
    if (batch_index[i] == SIZE_MAX) {
      dead.push_back({&entries[i], mapped[i].error_code, mapped[i].error_field, mapped[i].error_message});
      continue;
    }
    const boxcar::AcceptResult& result = results[batch_index[i]];
    if (result.ok()) {
      ++(result.receipt().kind == boxcar::Receipt::Kind::Accepted ? stats.accepted : stats.duplicates);
      continue;
    }
    std::string field, message;
    try {
      result.rethrow_if_error();
    } catch (const boxcar::InboxValidationError& e) {
      field = entry_field_of(e.field());
      message = e.what();
    } catch (const boxcar::InboxConflictError& e) {
      field = "id";  // the identity was reused for other content
      message = e.what();
    } catch (const std::exception& e) {
      message = e.what();
    }
    dead.push_back({&entries[i], result.error_code(), std::move(field), std::move(message)});
  }

  std::vector<std::string> xack = {"XACK", options_.stream, options_.group};
  xack.insert(xack.end(), ack_ids.begin(), ack_ids.end());
  if (dead.empty()) {
    redis().call(xack);
  } else {
    // Dead letters and acknowledgements commit together: a crash in between can neither
    // lose a rejected entry nor dead-letter it twice.
    redis().call({"MULTI"});
    for (const DeadLetter& d : dead) {
      std::vector<std::string> xadd = {"XADD",
                                       options_.dead_letter(),
                                       "*",
                                       "error_code",
                                       d.code,
                                       "error_field",
                                       d.field,
                                       "error",
                                       d.message,
                                       "entry_id",
                                       d.entry->id,
                                       "stream",
                                       options_.stream,
                                       "group",
                                       options_.group};
      for (const auto& [name, value] : d.entry->fields) {
        xadd.push_back(name);
        xadd.push_back(value);
      }
      redis().call(xadd);  // QUEUED
      boxcar::log_event(log(), boxcar::LogLevel::Warn, "entry dead-lettered",
                        {{"stream", options_.stream}, {"entry_id", d.entry->id}, {"code", d.code}, {"field", d.field}});
    }
    redis().call(xack);  // QUEUED
    const RedisValue exec = redis().call({"EXEC"});
    for (const RedisValue& r : exec.elements)
      if (r.is_error()) throw RedisCommandError("redis: EXEC: " + r.str);
    stats.dead_lettered = dead.size();
  }
  return stats;
}

IngressStats StreamIngress::reclaim_own_pending() {
  IngressStats total;
  std::string cursor = "0";
  for (;;) {
    const std::vector<StreamEntry> entries = xreadgroup(cursor, 0ms);
    if (entries.empty()) break;
    const IngressStats stats = process(entries);
    total += stats;
    if (stats.storage_failures) break;
    cursor = entries.back().id;  // page on: entries left pending are not re-read in a loop
  }
  if (total.read)
    boxcar::log_event(log(), boxcar::LogLevel::Info, "own pending entries reclaimed",
                      {{"stream", options_.stream}, {"entries", std::to_string(total.read)}});
  return total;
}

IngressStats StreamIngress::claim_idle() {
  IngressStats total;
  std::string cursor = "0-0";
  do {
    const RedisValue reply = redis().call({"XAUTOCLAIM", options_.stream, options_.group, options_.consumer_name,
                                           std::to_string(options_.claim_min_idle.count()), cursor, "COUNT",
                                           std::to_string(options_.batch_size)});
    // [next cursor, claimed entries, (Redis 7) ids of deleted entries dropped from the PEL]
    if (reply.elements.size() < 2) break;
    cursor = reply.elements[0].str;
    const IngressStats stats = process(parse_entries(reply.elements[1]));
    total += stats;
    if (stats.storage_failures) break;
  } while (cursor != "0-0");
  if (total.read)
    boxcar::log_event(log(), boxcar::LogLevel::Info, "idle entries claimed from other consumers",
                      {{"stream", options_.stream}, {"entries", std::to_string(total.read)}});
  return total;
}

IngressStats StreamIngress::read_new(std::chrono::milliseconds block) { return process(xreadgroup(">", block)); }

IngressStats StreamIngress::run_once() {
  ensure_group();
  IngressStats total = reclaim_own_pending();
  if (total.storage_failures) return total;
  total += claim_idle();
  while (!total.storage_failures) {
    const IngressStats stats = read_new(0ms);
    total += stats;
    if (stats.read == 0) break;
  }
  return total;
}

IngressStats StreamIngress::run(const std::atomic<bool>& stop) {
  IngressStats total;
  int failures = 0;
  bool recover = true;  // (re)start: set up the group and take back pending entries first
  auto next_claim = std::chrono::steady_clock::now();
  while (!stop.load()) {
    try {
      IngressStats stats;
      if (recover) {
        ensure_group();
        stats = reclaim_own_pending();
        if (!stats.storage_failures) {
          stats += claim_idle();
          next_claim = std::chrono::steady_clock::now() + options_.claim_interval;
        }
      } else if (std::chrono::steady_clock::now() >= next_claim) {
        stats = claim_idle();
        next_claim = std::chrono::steady_clock::now() + options_.claim_interval;
      } else {
        stats = read_new(options_.block);
      }
      total += stats;
      if (stats.storage_failures) {
        recover = true;  // the failed batch is in our pending list: read it again (ID 0)
        pause(boxcar::backoff_delay(options_.backoff, ++failures), stop);
      } else {
        recover = false;
        failures = 0;
      }
    } catch (const std::runtime_error& e) {  // Redis connection or command failures
      boxcar::log_event(log(), boxcar::LogLevel::Error, "redis failure; reconnecting",
                        {{"redis", redis_options_.describe()}, {"error", e.what()}});
      client_.reset();
      recover = true;
      pause(boxcar::backoff_delay(options_.backoff, ++failures), stop);
    }
  }
  return total;
}

}  // namespace redis_streams

// SqsIngress: receive, accept_many, dead-letter, delete (see sqs_ingress.hpp).
#include "sqs_ingress.hpp"

#include <charconv>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/logging.hpp"

namespace boxcar::examples::sqs {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// SQS allows at most 10 message attributes per message.
constexpr std::size_t kMaxAttributes = 10;
/// Dead-letter reasons are for people; a libpq or parser message can be long.
constexpr std::size_t kMaxReasonBytes = 1000;

spdlog::logger& log() {
  static const auto logger = boxcar::logger("sqs");
  return *logger;
}

MappedMessage rejected(std::string code, std::string field, std::string message) {
  return MappedMessage{
      .error_code = std::move(code), .error_field = std::move(field), .error_message = std::move(message)};
}

/// libpq messages span lines; a log event or an attribute value is one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string truncate_utf8(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a code point
  text.resize(end);
  return text;
}

/// A text attribute's value for logs; empty when absent.
std::string attribute_text(const SqsMessage& message, const char* name) {
  const auto it = message.attributes.find(name);
  return it == message.attributes.end() ? std::string() : it->second.string_value;
}

void pause(std::chrono::milliseconds delay, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + delay;
  while (!stop.load() && Clock::now() < until) std::this_thread::sleep_for(20ms);
}

/// The dead letter's attributes: the reason first, then as many of the original
/// attributes as SQS's limit of 10 leaves room for (identity attributes first).
MessageAttributes dead_letter_attributes(const SqsMessage& message, const std::string& code, const std::string& field,
                                         const std::string& reason) {
  MessageAttributes out;
  out[kDeadLetterCode] = {.string_value = code.empty() ? std::string("UNKNOWN") : code};
  if (!field.empty()) out[kDeadLetterField] = {.string_value = field};
  const std::string text = truncate_utf8(one_line(reason), kMaxReasonBytes);
  if (!text.empty()) out[kDeadLetterReason] = {.string_value = text};
  if (!message.message_id.empty()) out[kDeadLetterMessageId] = {.string_value = message.message_id};
  const auto copy = [&](const std::string& name, const MessageAttribute& value) {
    if (out.size() < kMaxAttributes && !out.contains(name)) out[name] = value;
  };
  const std::size_t own = out.size();
  for (const char* name : {"event-id", "event-type", "schema-version"}) {
    if (const auto it = message.attributes.find(name); it != message.attributes.end()) copy(it->first, it->second);
  }
  for (const auto& [name, value] : message.attributes) copy(name, value);
  if (out.size() - own < message.attributes.size()) {
    log_event(log(), LogLevel::Warn, "dead letter keeps only some original attributes",
              {{"message_id", message.message_id}, {"attributes", std::to_string(message.attributes.size())}});
  }
  return out;
}

}  // namespace

IngressStats& IngressStats::operator+=(const IngressStats& other) {
  received += other.received;
  accepted += other.accepted;
  duplicates += other.duplicates;
  dead_lettered += other.dead_lettered;
  storage_failures += other.storage_failures;
  unsettled += other.unsettled;
  return *this;
}

std::string message_field_of(const std::string& inbox_field) {
  static const std::map<std::string, std::string> kNames = {
      {"message_id", "event-id"},
      {"event_type", "event-type"},
      {"schema_version", "schema-version"},
      {"scope.id", "queue"},  // the tenant comes from the queue's configuration
      {"metadata/traceparent", "traceparent"},
      {"metadata/tracestate", "tracestate"},
      {"metadata/correlationId", "correlation-id"},
      {"metadata/causationId", "causation-id"},
  };
  if (const auto it = kNames.find(inbox_field); it != kNames.end()) return it->second;
  if (inbox_field.starts_with("payload")) return "body" + inbox_field.substr(7);
  return inbox_field;  // "source", "consumer": configuration, not the message
}

MappedMessage map_message(const SqsMessage& message, const TenantQueue& queue, const IngressOptions& options) {
  // A text attribute (String or Number); empty when absent, which accept() then names.
  // A Binary attribute where text is expected cannot be what the producer meant.
  std::string bad_attribute;
  const auto text = [&](const char* name) -> std::string {
    const auto it = message.attributes.find(name);
    if (it == message.attributes.end()) return {};
    if (it->second.data_type.starts_with("Binary")) {
      if (bad_attribute.empty()) bad_attribute = name;
      return {};
    }
    return it->second.string_value;
  };

  AcceptRequest request{
      // The queue's tenant: only that tenant's producers may send to its queue.
      .scope = Scope::tenant(queue.tenant),
      .source = options.source,
      .consumer = options.consumer,
      // The producer's event id, the same on every redelivery and on a producer's
      // re-send; never the SQS MessageId (new per SendMessage) or the ReceiptHandle
      // (new per receive).
      .message_id = text("event-id"),
      .event_type = text("event-type"),
      .metadata = {.traceparent = text("traceparent"),
                   .tracestate = text("tracestate"),
                   .correlation_id = text("correlation-id"),
                   .causation_id = text("causation-id")},
  };
  // schema-version: a decimal integer; anything else stays 0, which the inbox rejects as
  // INBOX_SCHEMA_VERSION_INVALID (reported on "schema-version").
  const std::string version = text("schema-version");
  int parsed = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), parsed);
  if (ec == std::errc{} && end == version.data() + version.size()) request.schema_version = parsed;
  if (!bad_attribute.empty()) {
    return rejected("SQS_ATTRIBUTE_INVALID", bad_attribute, "a Binary attribute where a String is expected");
  }

  try {
    // Strict parsing first (duplicate keys, unsafe integers, bad UTF-8 are errors, not
    // silently resolved), then the canonical text into a json value for the request.
    request.payload = nlohmann::json::parse(canonicalize_text(message.body));
  } catch (const JsonValueError& e) {
    return rejected(e.code(), "body" + e.path(), e.what());
  }
  return MappedMessage{.request = std::move(request)};
}

SqsIngress::SqsIngress(Inbox& inbox, SqsOptions sqs, TenantQueue queue, IngressOptions options)
    : inbox_(inbox), client_(std::move(sqs)), queue_(std::move(queue)), options_(std::move(options)) {}

IngressStats SqsIngress::poll_once() { return process(client_.receive_message(queue_.queue_url, options_.receive)); }

IngressStats SqsIngress::process(const std::vector<SqsMessage>& messages) {
  IngressStats stats{.received = messages.size()};
  if (messages.empty()) return stats;

  std::vector<MappedMessage> mapped;
  std::vector<AcceptRequest> batch;
  std::vector<std::size_t> batch_index(messages.size(), SIZE_MAX);
  mapped.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    mapped.push_back(map_message(messages[i], queue_, options_));
    if (mapped.back().request) {
      batch_index[i] = batch.size();
      batch.push_back(*mapped.back().request);
    }
  }

  std::vector<AcceptResult> results;
  try {
    results = inbox_.accept_many(batch);  // one transaction for the whole receive
  } catch (const InboxStorageError& e) {
    // Not durable (or not known to be): delete nothing, dead-letter nothing. Every
    // message reappears after its visibility timeout with the same event-id, and
    // accept_many then answers Duplicate for whatever did commit.
    log_event(log(), LogLevel::Warn, "batch not stored; leaving it to reappear",
              {{"tenant", queue_.tenant},
               {"messages", std::to_string(messages.size())},
               {"code", e.code()},
               {"error", one_line(e.what())}});
    stats.storage_failures = 1;
    return stats;
  }

  std::vector<DeleteEntry> deletes;
  std::vector<SendEntry> dead;
  std::map<std::string, std::size_t> dead_index;  // SendEntry id -> message index
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string id = std::to_string(i);
    std::string code = mapped[i].error_code, field = mapped[i].error_field, reason = mapped[i].error_message;
    if (batch_index[i] != SIZE_MAX) {
      const AcceptResult& result = results[batch_index[i]];
      if (result.ok()) {
        // Durable: deleting can no longer lose the message. A Duplicate is deleted too,
        // without touching the retained record (even a DEAD one).
        ++(result.receipt().kind == Receipt::Kind::Accepted ? stats.accepted : stats.duplicates);
        deletes.push_back({.id = id, .receipt_handle = messages[i].receipt_handle});
        continue;
      }
      code = result.error_code();
      try {
        result.rethrow_if_error();
      } catch (const InboxValidationError& e) {
        field = message_field_of(e.field());
        reason = e.what();
      } catch (const InboxConflictError& e) {
        field = "event-id";  // the identity was reused for other content
        reason =
            "identity already retained as receipt " + std::to_string(e.existing_id()) + " with a different fingerprint";
      } catch (const std::exception& e) {
        reason = e.what();
      }
    }
    dead_index[id] = i;
    dead.push_back(
        {.id = id, .body = messages[i].body, .attributes = dead_letter_attributes(messages[i], code, field, reason)});
    log_event(log(), LogLevel::Warn, "dead-lettering message",
              {{"tenant", queue_.tenant},
               {"event_id", attribute_text(messages[i], "event-id")},
               {"message_id", messages[i].message_id},
               {"code", code},
               {"field", field}});
  }

  // Dead letters before the delete: a message leaves the source queue only once its
  // dead letter is stored. A crash in between sends it to the dead-letter queue twice,
  // never zero times.
  if (!dead.empty()) {
    try {
      const BatchResult sent = client_.send_message_batch(queue_.dead_letter_queue_url, dead);
      for (const std::string& id : sent.successful) {
        if (!dead_index.contains(id)) continue;
        deletes.push_back({.id = id, .receipt_handle = messages[dead_index.at(id)].receipt_handle});
        ++stats.dead_lettered;
      }
      for (const BatchFailure& failure : sent.failed) {
        ++stats.unsettled;
        log_event(log(), LogLevel::Error, "dead letter not sent; the message will reappear",
                  {{"tenant", queue_.tenant}, {"code", failure.code}, {"error", failure.message}});
      }
    } catch (const SqsError& e) {
      stats.unsettled += dead.size();
      log_event(log(), LogLevel::Error, "dead letters not sent; the messages will reappear",
                {{"tenant", queue_.tenant}, {"code", e.code()}, {"error", e.what()}});
    }
  }

  if (!deletes.empty()) {
    try {
      const BatchResult deleted = client_.delete_message_batch(queue_.queue_url, deletes);
      for (const BatchFailure& failure : deleted.failed) {
        // Typically an expired receipt handle: the visibility timeout ran out while the
        // batch was in work. The message reappears; its event-id is a Duplicate then.
        ++stats.unsettled;
        log_event(log(), LogLevel::Warn, "delete failed; the message will reappear",
                  {{"tenant", queue_.tenant}, {"code", failure.code}, {"error", failure.message}});
      }
    } catch (const SqsError& e) {
      stats.unsettled += deletes.size();
      log_event(log(), LogLevel::Error, "delete batch failed; the messages will reappear",
                {{"tenant", queue_.tenant}, {"code", e.code()}, {"error", e.what()}});
    }
  }
  return stats;
}

IngressStats SqsIngress::drain() {
  IngressOptions immediate = options_;
  immediate.receive.wait_seconds = 0;
  IngressStats total;
  for (;;) {
    const IngressStats stats = process(client_.receive_message(queue_.queue_url, immediate.receive));
    total += stats;
    if (stats.received == 0 || stats.storage_failures) return total;
  }
}

IngressStats SqsIngress::run(const std::atomic<bool>& stop) {
  log_event(log(), LogLevel::Info, "polling",
            {{"tenant", queue_.tenant},
             {"queue", queue_.queue_url},
             {"dead_letter_queue", queue_.dead_letter_queue_url},
             {"consumer", options_.consumer}});
  IngressStats total;
  int failures = 0;
  while (!stop.load()) {
    try {
      const IngressStats stats = poll_once();
      total += stats;
      if (stats.storage_failures) {
        pause(backoff_delay(options_.backoff, ++failures), stop);
      } else {
        failures = 0;
      }
    } catch (const SqsError& e) {
      log_event(log(), LogLevel::Error, "receive failed; retrying",
                {{"tenant", queue_.tenant}, {"code", e.code()}, {"error", e.what()}});
      pause(backoff_delay(options_.backoff, ++failures), stop);
    } catch (const std::exception& e) {
      // Anything unforeseen: nothing of the batch was deleted, so it reappears. That is
      // the safe side; a delete or a dead letter would not be.
      log_event(log(), LogLevel::Error, "unexpected error; the batch will reappear",
                {{"tenant", queue_.tenant}, {"error", one_line(e.what())}});
      pause(backoff_delay(options_.backoff, ++failures), stop);
    }
  }
  return total;
}

}  // namespace boxcar::examples::sqs

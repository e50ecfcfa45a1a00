// Kafka records -> Inbox::accept_many -> dead letters for what can never be accepted.
#include "ingress.hpp"

#include <cctype>
#include <charconv>

#include <spdlog/spdlog.h>

#include "boxcar/inbox/errors.hpp"
#include "boxcar/core/canonical_json.hpp"

namespace orders {
namespace {

constexpr std::string_view kTenantPrefix = "tenant.";
constexpr std::string_view kTenantSuffix = ".orders";

MappedRecord rejected(std::string code, std::string message) {
  return {.code = std::move(code), .message = std::move(message)};
}

/// Records the first problem of a record; later ones would only repeat the diagnosis.
void fail(MappedRecord& error, std::string code, std::string message) {
  if (error.code.empty()) error = rejected(std::move(code), std::move(message));
}

bool valid_tenant(std::string_view tenant) {
  if (tenant.empty()) return false;
  for (const char c : tenant)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

/// A header every request needs; nullopt (and `error` set) when it is missing.
std::optional<std::string> required(const KafkaRecord& record, const char* name, MappedRecord& error) {
  auto value = record.header(name);
  if (!value) fail(error, "KAFKA_HEADER_MISSING", std::string("header ") + name + " is missing");
  return value;
}

std::optional<int> version(const KafkaRecord& record, const char* name, MappedRecord& error) {
  const auto text = required(record, name, error);
  if (!text) return std::nullopt;
  int number = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), number);
  if (ec != std::errc{} || end != text->data() + text->size() || text->empty()) {
    fail(error, "KAFKA_HEADER_INVALID",
         std::string("header ") + name + " is not a decimal integer: '" + text->substr(0, 32) + "'");
    return std::nullopt;
  }
  return number;
}

/// The value as JSON, parsed strictly (duplicate keys, unsafe integers and bad UTF-8 are
/// errors, never silently resolved).
std::optional<nlohmann::json> payload(const KafkaRecord& record, MappedRecord& error) {
  try {
    return nlohmann::json::parse(boxcar::canonicalize_text(record.value));
  } catch (const boxcar::JsonValueError& e) {
    fail(error, e.code(), std::string("value: ") + e.what());
    return std::nullopt;
  }
}

}  // namespace

std::string tenant_topic(const std::string& tenant) {
  return std::string(kTenantPrefix) + tenant + std::string(kTenantSuffix);
}

std::optional<std::string> tenant_of_topic(std::string_view topic) {
  if (!topic.starts_with(kTenantPrefix) || !topic.ends_with(kTenantSuffix)) return std::nullopt;
  topic.remove_prefix(kTenantPrefix.size());
  topic.remove_suffix(kTenantSuffix.size());
  if (!valid_tenant(topic)) return std::nullopt;
  return std::string(topic);
}

MappedRecord order_request(const KafkaRecord& record) {
  // The tenant is who may write this topic, never what a record says about itself.
  const auto tenant = tenant_of_topic(record.topic);
  if (!tenant) return rejected("KAFKA_TOPIC_NOT_TENANT", "topic " + record.topic + " is not tenant.<tenant>.orders");
  if (const auto claimed = record.header("tenant"); claimed && *claimed != *tenant)
    return rejected("TENANT_MISMATCH", "header tenant names another tenant than topic " + record.topic);
  MappedRecord error;
  const auto message_id = required(record, "message-id", error);
  const auto type = required(record, "type", error);
  const auto schema_version = version(record, "version", error);
  const auto body = payload(record, error);
  if (!message_id || !type || !schema_version || !body) return error;
  return {.request = boxcar::AcceptRequest{.scope = boxcar::Scope::tenant(*tenant),
                                           .source = kOrdersSource,
                                           .consumer = kProjection,
                                           .message_id = *message_id,
                                           .event_type = *type,
                                           .schema_version = *schema_version,
                                           .payload = *body}};
}

MappedRecord projected_request(const KafkaRecord& record) {
  MappedRecord error;
  // Trusted: only the Boxcar publisher's principal may write orders.projected (topic
  // ACL), and it copies the scope of a receipt that was authenticated at ingress. A
  // global event carries tenant_scope=global and no tenant_id header.
  const auto scope_kind = required(record, "tenant_scope", error);
  const bool global = scope_kind && *scope_kind == "global";
  const auto tenant = global ? std::optional<std::string>("") : required(record, "tenant_id", error);
  const auto event_id = required(record, "event_id", error);  // the stable id every publish carries
  const auto type = required(record, "event_type", error);
  const auto schema_version = version(record, "schema_version", error);
  const auto body = payload(record, error);
  if (!scope_kind || !tenant || !event_id || !type || !schema_version || !body) return error;
  return {.request = boxcar::AcceptRequest{.scope = global ? boxcar::Scope::global() : boxcar::Scope::tenant(*tenant),
                                           .source = std::string("kafka:") + kProjectedTopic,
                                           .consumer = kDownstream,
                                           .message_id = *event_id,
                                           .event_type = *type,
                                           .schema_version = *schema_version,
                                           .payload = *body,
                                           .metadata = {.causation_id = record.header("causation_id").value_or("")}}};
}

std::vector<DeadLetter> accept_batch(boxcar::Inbox& inbox, const std::vector<KafkaRecord>& batch,
                                     RecordMapper to_request, std::map<std::string, int>& counts) {
  std::map<std::string, int> outcome;
  std::vector<DeadLetter> dead;
  std::vector<boxcar::AcceptRequest> requests;
  std::vector<std::size_t> record_of;  // requests[i] came from batch[record_of[i]]
  for (std::size_t i = 0; i < batch.size(); ++i) {
    MappedRecord mapped = to_request(batch[i]);
    if (mapped.request) {
      requests.push_back(std::move(*mapped.request));
      record_of.push_back(i);
    } else {
      ++outcome["invalid"];
      dead.push_back({.index = i, .code = std::move(mapped.code), .message = std::move(mapped.message)});
    }
  }
  // One transaction; an invalid or conflicting item does not affect the others. An
  // InboxStorageError escapes: then nothing is acknowledged or dead-lettered.
  const std::vector<boxcar::AcceptResult> results =
      requests.empty() ? std::vector<boxcar::AcceptResult>{} : inbox.accept_many(requests);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const boxcar::AcceptResult& result = results[i];
    if (result.ok()) {
      ++outcome[result.receipt().kind == boxcar::Receipt::Kind::Accepted ? "accepted" : "duplicate"];
      continue;
    }
    std::string message;
    try {
      result.rethrow_if_error();
    } catch (const std::exception& e) {
      message = e.what();
    }
    ++outcome[result.error_code() == "IDENTITY_CONFLICT" ? "conflict" : "invalid"];
    dead.push_back({.index = record_of[i], .code = result.error_code(), .message = std::move(message)});
  }
  for (const DeadLetter& d : dead) {
    const KafkaRecord& r = batch[d.index];
    spdlog::warn("dead-lettering {}/{}@{}: {}: {}", r.topic, r.partition, r.offset, d.code, d.message);
  }
  for (const auto& [name, n] : outcome) counts[name] += n;
  return dead;
}

nlohmann::json accept_topic(boxcar::Inbox& inbox, const ConsumerOptions& options, RecordMapper to_request,
                            const std::atomic<bool>& stop) {
  std::map<std::string, int> counts;
  consume_batches(options, stop, [&](const std::vector<KafkaRecord>& batch) {
    return accept_batch(inbox, batch, to_request, counts);
  });
  return counts;
}

}  // namespace orders

// The Kafka ingress of examples/orders: records -> AcceptRequests -> accept_many, with
// the tenant taken from the topic (one topic per tenant, which only that tenant's
// principal may write) and every record that can never be accepted dead-lettered.
// Shared by orders_demo and the example's integration test.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "kafka_batches.hpp"

namespace orders {

constexpr const char* kProjection = "orders.projection.v1";  // the worker's consumer
constexpr const char* kDownstream = "inventory.v1";          // order.projected, accepted downstream
constexpr const char* kProjectedTopic = "orders.projected";
constexpr const char* kOrdersSource = "kafka:orders";  // one source for every tenant topic

/// Per-tenant ingress topics are "tenant.<tenant>.orders". In production a prefixed ACL
/// (resource pattern "tenant.<tenant>.", PREFIXED) lets only that tenant's principal
/// write them, so the topic a record arrived on authenticates its tenant.
constexpr const char* kTenantTopicPattern = R"(^tenant\.[A-Za-z0-9_-]+\.orders$)";
std::string tenant_topic(const std::string& tenant);
/// The tenant of a per-tenant topic, or nullopt when `topic` is not one.
std::optional<std::string> tenant_of_topic(std::string_view topic);

/// The request a record maps to, or why it can never be accepted (code + message).
struct MappedRecord {
  std::optional<boxcar::AcceptRequest> request{};
  std::string code{};
  std::string message{};
};
using RecordMapper = MappedRecord (*)(const KafkaRecord&);

/// order.created on a tenant topic: headers message-id, type, version (decimal); the
/// value is the JSON payload (parsed strictly). A `tenant` header is not needed; one
/// that names another tenant than the topic is rejected (TENANT_MISMATCH).
MappedRecord order_request(const KafkaRecord& record);
/// order.projected, written by Boxcar's publisher (headers event_id, event_type,
/// schema_version, tenant_id, causation_id).
MappedRecord projected_request(const KafkaRecord& record);

/// Maps `batch`, accepts what maps in one accept_many transaction, adds the outcomes
/// to `counts` (accepted, duplicate, conflict, invalid) and returns the dead letters:
/// records that do not map, InboxValidationError and IDENTITY_CONFLICT results.
/// @throws InboxStorageError (nothing counted): the batch must not be acknowledged.
std::vector<DeadLetter> accept_batch(boxcar::Inbox& inbox, const std::vector<KafkaRecord>& batch,
                                     RecordMapper to_request, std::map<std::string, int>& counts);

/// consume_batches with accept_batch as the handler; returns the counts.
nlohmann::json accept_topic(boxcar::Inbox& inbox, const ConsumerOptions& options, RecordMapper to_request,
                            const std::atomic<bool>& stop);

}  // namespace orders

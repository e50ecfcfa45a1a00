// How the conformance vectors (conformance/*.json) spell requests, events and options,
// and back: shared by the generator and the C++ tests that replay the vectors. The
// spelling is the TypeScript client's (camelCase, scope as {"kind", "id"}); payloads
// travel as JSON text ("payloadText") so each language parses them with its own parser.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"

namespace boxcar::conformance {

inline nlohmann::json scope_to_json(const Scope& scope) {
  if (scope.kind == Scope::Kind::Global) {
    nlohmann::json j = {{"kind", "global"}};
    if (!scope.id.empty()) j["id"] = scope.id;  // an invalid global scope, kept as it was
    return j;
  }
  return {{"kind", "tenant"}, {"id", scope.id}};
}

inline Scope scope_from_json(const nlohmann::json& j) {
  Scope scope{j.at("kind").get<std::string>() == "global" ? Scope::Kind::Global : Scope::Kind::Tenant, ""};
  if (j.contains("id")) scope.id = j.at("id").get<std::string>();
  return scope;
}

inline nlohmann::json limits_to_json(const CanonicalLimits& limits) {
  return {{"maxDepth", limits.max_depth}, {"maxBytes", limits.max_bytes}};
}

inline CanonicalLimits limits_from_json(const nlohmann::json& j) {
  return {.max_depth = j.at("maxDepth").get<std::size_t>(), .max_bytes = j.at("maxBytes").get<std::size_t>()};
}

inline nlohmann::json options_to_json(const InboxOptions& options) {
  nlohmann::json ordering = nlohmann::json::object();
  for (const auto& [consumer, rule] : options.ordering) {
    nlohmann::json r = {{"key", rule.key.from_payload() ? nlohmann::json{{"payloadPointer", rule.key.path()}}
                                                        : nlohmann::json{{"metadataHeader", rule.key.path()}}}};
    if (const auto park = rule.head_of_line.park_after_attempts()) r["parkAfter"] = *park;
    ordering[consumer] = r;
  }
  return {{"consumers", options.consumers},
          {"ordering", ordering},
          {"payloadLimits", limits_to_json(options.payload_limits)},
          {"maxStatementBytes", options.max_statement_bytes}};
}

/// The options of a vector's inbox, on `schema`, without wake-ups.
inline InboxOptions options_from_json(const nlohmann::json& j, const std::string& schema) {
  InboxOptions options{.schema = schema,
                       .consumers = j.at("consumers").get<std::vector<std::string>>(),
                       .payload_limits = limits_from_json(j.at("payloadLimits")),
                       .max_statement_bytes = j.at("maxStatementBytes").get<std::size_t>(),
                       .notify = false};
  for (const auto& [consumer, rule] : j.at("ordering").items()) {
    const auto& key = rule.at("key");
    OrderingRule r{.key = key.contains("payloadPointer")
                              ? OrderingKey::payload_pointer(key.at("payloadPointer").get<std::string>())
                              : OrderingKey::metadata_header(key.at("metadataHeader").get<std::string>())};
    if (rule.contains("parkAfter")) r.head_of_line = HeadOfLine::park_after(rule.at("parkAfter").get<int>());
    options.ordering.emplace(consumer, r);
  }
  return options;
}

inline InboxOptions with_schema(InboxOptions options, const std::string& schema) {
  options.schema = schema;
  options.notify = false;
  return options;
}

inline nlohmann::json request_to_json(const AcceptRequest& r, const std::string& payload_text) {
  nlohmann::json metadata = nlohmann::json::object();
  const auto put = [&](const char* name, const std::string& value) {
    if (!value.empty()) metadata[name] = value;
  };
  put("traceparent", r.metadata.traceparent);
  put("tracestate", r.metadata.tracestate);
  put("correlationId", r.metadata.correlation_id);
  put("causationId", r.metadata.causation_id);
  if (!r.metadata.headers.empty()) metadata["headers"] = r.metadata.headers;
  return {{"scope", scope_to_json(r.scope)}, {"source", r.source},        {"consumer", r.consumer},
          {"messageId", r.message_id},       {"eventType", r.event_type}, {"schemaVersion", r.schema_version},
          {"payloadText", payload_text},     {"metadata", metadata}};
}

inline AcceptRequest request_from_json(const nlohmann::json& j) {
  AcceptRequest r{.scope = scope_from_json(j.at("scope")),
                  .source = j.at("source").get<std::string>(),
                  .consumer = j.at("consumer").get<std::string>(),
                  .message_id = j.at("messageId").get<std::string>(),
                  .event_type = j.at("eventType").get<std::string>(),
                  .schema_version = j.at("schemaVersion").get<int>(),
                  .payload = nlohmann::json::parse(j.at("payloadText").get<std::string>())};
  const auto& m = j.at("metadata");
  const auto get = [&](const char* name) { return m.contains(name) ? m.at(name).get<std::string>() : std::string(); };
  r.metadata.traceparent = get("traceparent");
  r.metadata.tracestate = get("tracestate");
  r.metadata.correlation_id = get("correlationId");
  r.metadata.causation_id = get("causationId");
  if (m.contains("headers")) r.metadata.headers = m.at("headers").get<std::map<std::string, std::string>>();
  return r;
}

inline nlohmann::json outbox_options_to_json(const OutboxOptions& options) {
  return {{"topics", options.topics},
          {"maxRecordBytes", options.max_record_bytes},
          {"payloadLimits", limits_to_json(options.payload_limits)}};
}

inline OutboxOptions outbox_options_from_json(const nlohmann::json& j, const std::string& schema) {
  return {.schema = schema,
          .payload_limits = limits_from_json(j.at("payloadLimits")),
          .max_record_bytes = j.at("maxRecordBytes").get<std::size_t>(),
          .topics = j.at("topics").get<std::set<std::string>>(),
          .notify = false};
}

inline OutboxOptions with_schema(OutboxOptions options, const std::string& schema) {
  options.schema = schema;
  options.notify = false;
  return options;
}

inline nlohmann::json event_to_json(const OutboxMessage& m, const std::string& payload_text) {
  return {{"eventType", m.event_type},
          {"schemaVersion", m.schema_version},
          {"topic", m.topic},
          {"payloadText", payload_text}};
}

inline OutboxMessage event_from_json(const nlohmann::json& j) {
  return {.event_type = j.at("eventType").get<std::string>(),
          .schema_version = j.at("schemaVersion").get<int>(),
          .topic = j.at("topic").get<std::string>(),
          .payload = nlohmann::json::parse(j.at("payloadText").get<std::string>())};
}

inline nlohmann::json emit_options_to_json(const EmitOptions& o) {
  nlohmann::json j = {{"scope", scope_to_json(o.scope)}, {"ordered", o.ordered}};
  const auto put = [&](const char* name, const std::string& value) {
    if (!value.empty()) j[name] = value;
  };
  put("key", o.key);
  put("causationId", o.causation_id);
  put("correlationId", o.correlation_id);
  put("traceparent", o.traceparent);
  if (!o.headers.empty()) j["headers"] = o.headers;
  return j;
}

inline EmitOptions emit_options_from_json(const nlohmann::json& j) {
  const auto get = [&](const char* name) { return j.contains(name) ? j.at(name).get<std::string>() : std::string(); };
  EmitOptions o{.scope = scope_from_json(j.at("scope")),
                .causation_id = get("causationId"),
                .correlation_id = get("correlationId"),
                .key = get("key"),
                .traceparent = get("traceparent"),
                .ordered = j.at("ordered").get<bool>()};
  if (j.contains("headers")) o.headers = j.at("headers").get<std::map<std::string, std::string>>();
  return o;
}

}  // namespace boxcar::conformance

// Decoding of claim statement rows.
#include "claimed_receipt.hpp"

namespace boxcar::detail {
namespace {

Metadata metadata_from_json(const std::string& text) {
  const auto json = nlohmann::json::parse(text);
  Metadata m;
  m.traceparent = json.value("traceparent", "");
  m.tracestate = json.value("tracestate", "");
  m.correlation_id = json.value("correlationId", "");
  m.causation_id = json.value("causationId", "");
  if (json.contains("headers")) m.headers = json["headers"].get<std::map<std::string, std::string>>();
  return m;
}

}  // namespace

ClaimedReceipt ClaimedReceipt::from_row(const pqxx::row& row) {
  ClaimedReceipt r;
  r.id = row["id"].as<std::int64_t>();
  r.claim_token = row["claim_token"].is_null() ? "" : row["claim_token"].as<std::string>();
  r.attempt = row["attempts"].as<int>();
  r.scope = row["scope_kind"].as<std::string>() == "global" ? Scope::global()
                                                            : Scope::tenant(row["scope_id"].as<std::string>());
  r.source = row["source"].as<std::string>();
  r.consumer = row["consumer"].as<std::string>();
  r.message_id = row["message_id"].as<std::string>();
  r.event_type = row["event_type"].as<std::string>();
  r.schema_version = row["schema_version"].as<int>();
  // jsonb's text is not canonical, but the number rule of canonicalize() makes this parse
  // canonicalise to the accepted bytes (docs/schema.md, "Payload JSON").
  r.payload = nlohmann::json::parse(row["payload"].c_str());
  r.metadata = metadata_from_json(row["metadata"].as<std::string>());
  r.status = row["status"].as<std::string>();
  r.suspect = row["suspect"].as<bool>();
  r.ordered = row["ordered"].as<bool>();
  return r;
}

}  // namespace boxcar::detail

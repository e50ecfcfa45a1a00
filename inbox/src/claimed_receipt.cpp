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
  r.id = row[0].as<std::int64_t>();
  r.claim_token = row[1].is_null() ? "" : row[1].as<std::string>();
  r.attempt = row[2].as<int>();
  r.scope = row[3].as<std::string>() == "global" ? Scope::global() : Scope::tenant(row[4].as<std::string>());
  r.source = row[5].as<std::string>();
  r.consumer = row[6].as<std::string>();
  r.message_id = row[7].as<std::string>();
  r.event_type = row[8].as<std::string>();
  r.schema_version = row[9].as<int>();
  // jsonb's text is not canonical, but the number rule of canonicalize() makes this parse
  // canonicalise to the accepted bytes (docs/schema.md, "Payload JSON").
  r.payload = nlohmann::json::parse(row[10].c_str());
  r.metadata = metadata_from_json(row[11].as<std::string>());
  r.status = row[12].as<std::string>();
  return r;
}

}  // namespace boxcar::detail

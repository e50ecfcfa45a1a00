// SqsClient: AWS JSON 1.0 calls over one libcurl easy handle (see sqs_client.hpp).
#include "sqs_client.hpp"

#include <curl/curl.h>

#include <charconv>
#include <mutex>

#include <nlohmann/json.hpp>

namespace boxcar::examples::sqs {
namespace {

using json = nlohmann::json;

void global_init() {
  // curl_global_init is not thread-safe on every libcurl build: once per process.
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw SqsError("SQS_TRANSPORT", "curl_global_init failed");
  });
}

std::size_t append_to_string(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

json attributes_to_json(const MessageAttributes& attributes) {
  json out = json::object();
  for (const auto& [name, value] : attributes) {
    json v = {{"DataType", value.data_type}};
    if (value.data_type.starts_with("Binary")) {
      v["BinaryValue"] = value.binary_value;
    } else {
      v["StringValue"] = value.string_value;
    }
    out[name] = std::move(v);
  }
  return out;
}

MessageAttributes attributes_from_json(const json& in) {
  MessageAttributes out;
  if (!in.is_object()) return out;
  for (const auto& [name, value] : in.items()) {
    MessageAttribute attribute;
    attribute.data_type = value.value("DataType", std::string("String"));
    attribute.string_value = value.value("StringValue", std::string());
    attribute.binary_value = value.value("BinaryValue", std::string());
    out.emplace(name, std::move(attribute));
  }
  return out;
}

BatchResult batch_result_from_json(const json& answer) {
  BatchResult result;
  for (const json& entry : answer.value("Successful", json::array())) {
    result.successful.push_back(entry.value("Id", ""));
  }
  for (const json& entry : answer.value("Failed", json::array())) {
    result.failed.push_back({.id = entry.value("Id", ""),
                             .code = entry.value("Code", ""),
                             .message = entry.value("Message", ""),
                             .sender_fault = entry.value("SenderFault", false)});
  }
  return result;
}

/// "com.amazonaws.sqs#QueueDoesNotExist" -> "QueueDoesNotExist".
std::string error_code_of(const json& answer) {
  std::string type = answer.is_object() ? answer.value("__type", std::string()) : std::string();
  if (const auto hash = type.rfind('#'); hash != std::string::npos) type = type.substr(hash + 1);
  return type.empty() ? std::string("SQS_ERROR") : type;
}

std::string error_message_of(const json& answer, const std::string& raw) {
  if (answer.is_object()) {
    for (const char* key : {"message", "Message"}) {
      if (answer.contains(key) && answer[key].is_string()) return answer[key].get<std::string>();
    }
  }
  return raw.substr(0, 300);
}

}  // namespace

struct SqsClient::Curl {
  CURL* handle = nullptr;
  ~Curl() {
    if (handle) curl_easy_cleanup(handle);
  }
};

SqsClient::SqsClient(SqsOptions options) : options_(std::move(options)), curl_(std::make_unique<Curl>()) {
  global_init();
  curl_->handle = curl_easy_init();
  if (!curl_->handle) throw SqsError("SQS_TRANSPORT", "curl_easy_init failed");
}

SqsClient::~SqsClient() = default;

json SqsClient::call(const std::string& action, const json& request, std::chrono::milliseconds extra_timeout) {
  CURL* h = curl_->handle;
  // Options persist on a reused handle; resetting keeps the connection cache, so
  // consecutive calls still share one keep-alive connection.
  curl_easy_reset(h);
  const std::string body = request.dump();
  std::string response;
  char error_buffer[CURL_ERROR_SIZE] = {};

  struct HeaderList {
    curl_slist* list = nullptr;
    ~HeaderList() { curl_slist_free_all(list); }
  } headers;
  const std::string target = "X-Amz-Target: AmazonSQS." + action;
  headers.list = curl_slist_append(headers.list, "Content-Type: application/x-amz-json-1.0");
  headers.list = curl_slist_append(headers.list, target.c_str());
  std::string token_header;
  if (!options_.session_token.empty()) {
    token_header = "X-Amz-Security-Token: " + options_.session_token;
    headers.list = curl_slist_append(headers.list, token_header.c_str());
  }

  curl_easy_setopt(h, CURLOPT_URL, options_.endpoint.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append_to_string);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: threads call this
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((options_.timeout + extra_timeout).count()));
  std::string sigv4;
  if (!options_.access_key_id.empty()) {
    sigv4 = "aws:amz:" + options_.region + ":sqs";
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.access_key_id.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.secret_access_key.c_str());
  }

  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    throw SqsError("SQS_TRANSPORT", "sqs " + action + " to " + options_.endpoint + ": " +
                                        (error_buffer[0] ? std::string(error_buffer) : curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  json answer = json::parse(response.empty() ? std::string("{}") : response, nullptr, /*allow_exceptions=*/false);
  if (status >= 300) {
    throw SqsError(error_code_of(answer),
                   "sqs " + action + ": HTTP " + std::to_string(status) + ": " + error_message_of(answer, response),
                   status);
  }
  if (answer.is_discarded() || !answer.is_object()) {
    throw SqsError("SQS_RESPONSE_INVALID",
                   "sqs " + action + ": the answer is not a JSON object: " + response.substr(0, 300), status);
  }
  return answer;
}

std::string SqsClient::create_queue(const std::string& name, const std::map<std::string, std::string>& attributes) {
  json request = {{"QueueName", name}};
  if (!attributes.empty()) request["Attributes"] = attributes;
  return call("CreateQueue", request).at("QueueUrl").get<std::string>();
}

std::string SqsClient::send_message(const std::string& queue_url, const std::string& body,
                                    const MessageAttributes& attributes) {
  json request = {{"QueueUrl", queue_url}, {"MessageBody", body}};
  if (!attributes.empty()) request["MessageAttributes"] = attributes_to_json(attributes);
  return call("SendMessage", request).value("MessageId", std::string());
}

BatchResult SqsClient::send_message_batch(const std::string& queue_url, const std::vector<SendEntry>& entries) {
  json list = json::array();
  for (const SendEntry& entry : entries) {
    json e = {{"Id", entry.id}, {"MessageBody", entry.body}};
    if (!entry.attributes.empty()) e["MessageAttributes"] = attributes_to_json(entry.attributes);
    list.push_back(std::move(e));
  }
  return batch_result_from_json(call("SendMessageBatch", {{"QueueUrl", queue_url}, {"Entries", list}}));
}

std::vector<SqsMessage> SqsClient::receive_message(const std::string& queue_url, const ReceiveOptions& options) {
  json request = {{"QueueUrl", queue_url},
                  {"MaxNumberOfMessages", options.max_messages},
                  {"WaitTimeSeconds", options.wait_seconds},
                  {"MessageAttributeNames", {"All"}},
                  // The current name and its deprecated predecessor: servers know one or both.
                  {"MessageSystemAttributeNames", {"ApproximateReceiveCount"}},
                  {"AttributeNames", {"ApproximateReceiveCount"}}};
  if (options.visibility_timeout_seconds) request["VisibilityTimeout"] = *options.visibility_timeout_seconds;
  const json answer = call("ReceiveMessage", request, std::chrono::seconds(options.wait_seconds));
  std::vector<SqsMessage> messages;
  for (const json& m : answer.value("Messages", json::array())) {
    SqsMessage message{.message_id = m.value("MessageId", ""),
                       .receipt_handle = m.value("ReceiptHandle", ""),
                       .body = m.value("Body", ""),
                       .attributes = attributes_from_json(m.value("MessageAttributes", json::object()))};
    const std::string count = m.value("Attributes", json::object()).value("ApproximateReceiveCount", "0");
    std::from_chars(count.data(), count.data() + count.size(), message.receive_count);
    messages.push_back(std::move(message));
  }
  return messages;
}

BatchResult SqsClient::delete_message_batch(const std::string& queue_url, const std::vector<DeleteEntry>& entries) {
  json list = json::array();
  for (const DeleteEntry& entry : entries) list.push_back({{"Id", entry.id}, {"ReceiptHandle", entry.receipt_handle}});
  return batch_result_from_json(call("DeleteMessageBatch", {{"QueueUrl", queue_url}, {"Entries", list}}));
}

std::map<std::string, std::string> SqsClient::get_queue_attributes(const std::string& queue_url,
                                                                   const std::vector<std::string>& names) {
  const json answer = call("GetQueueAttributes", {{"QueueUrl", queue_url}, {"AttributeNames", names}});
  const json attributes = answer.value("Attributes", json::object());  // items() must not outlive it
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : attributes.items()) {
    out[name] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return out;
}

}  // namespace boxcar::examples::sqs

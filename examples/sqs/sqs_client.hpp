// A small Amazon SQS client over libcurl, speaking the AWS JSON 1.0 protocol
// (POST /, X-Amz-Target: AmazonSQS.<Action>, Content-Type: application/x-amz-json-1.0),
// which current AWS SDKs use and SQS-compatible servers such as local-aws-sqs accept.
// Requests are signed with AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4) when
// credentials are configured; a local server that does not check signatures needs none.
//
// Only the calls the ingress example and its test need. Private to examples/sqs.
//
// Thread-safety: one SqsClient per thread (it owns one libcurl handle and its
// keep-alive connection).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "boxcar/core/error.hpp"

namespace boxcar::examples::sqs {

struct SqsOptions {
  /// The service endpoint, e.g. "https://sqs.eu-west-1.amazonaws.com" or
  /// "http://127.0.0.1:9324". Queue URLs name their queue; the endpoint receives the call.
  std::string endpoint{};
  /// Signing region; also what SigV4's credential scope names.
  std::string region = "us-east-1";
  /// Empty: requests are not signed (a local server). Else SigV4 with these.
  std::string access_key_id{};
  std::string secret_access_key{};
  std::string session_token{};
  /// Connect plus transfer limit of a call; a long poll adds its wait time on top.
  std::chrono::milliseconds timeout{10000};
};

/// A failed SQS call. code(): the service's error code ("QueueDoesNotExist",
/// "ReceiptHandleIsInvalid", ...) or SQS_TRANSPORT (no answer: connection refused, timeout)
/// or SQS_RESPONSE_INVALID (an answer that is not the expected JSON).
class SqsError final : public Error {
 public:
  SqsError(std::string code, const std::string& message, long http_status = 0)
      : Error(std::move(code), message), http_status_(http_status) {}
  /// 0 when no HTTP answer arrived.
  long http_status() const noexcept { return http_status_; }

 private:
  long http_status_;
};

/// A message attribute as SQS carries it: DataType "String", "Number[.label]" or
/// "Binary[.label]"; string_value for the first two, binary_value (base64) for Binary.
struct MessageAttribute {
  std::string data_type = "String";
  std::string string_value{};
  std::string binary_value{};
};
using MessageAttributes = std::map<std::string, MessageAttribute>;

/// One received message. receipt_handle is what deletes it, valid for this receive
/// only; message_id is assigned by SQS per SendMessage.
struct SqsMessage {
  std::string message_id{};
  std::string receipt_handle{};
  std::string body{};
  MessageAttributes attributes{};
  /// ApproximateReceiveCount: 1 on the first delivery.
  int receive_count = 0;
};

struct ReceiveOptions {
  int max_messages = 10;  // 1..10
  int wait_seconds = 20;  // long poll, 0..20
  /// Override of the queue's visibility timeout for these messages; nullopt: the queue's.
  std::optional<int> visibility_timeout_seconds{};
};

struct DeleteEntry {
  std::string id;  // unique within the batch; echoed in the result
  std::string receipt_handle;
};

struct SendEntry {
  std::string id;  // unique within the batch
  std::string body;
  MessageAttributes attributes{};
};

struct BatchFailure {
  std::string id;
  std::string code;
  std::string message;
  bool sender_fault = false;
};

/// Per-entry outcome of a batch call: the call itself can succeed while entries fail.
struct BatchResult {
  std::vector<std::string> successful{};
  std::vector<BatchFailure> failed{};
};

class SqsClient {
 public:
  explicit SqsClient(SqsOptions options);
  ~SqsClient();
  SqsClient(const SqsClient&) = delete;
  SqsClient& operator=(const SqsClient&) = delete;

  /// One JSON 1.0 call: POSTs `request`, returns the parsed answer.
  /// @throws SqsError (the service's error code, SQS_TRANSPORT or SQS_RESPONSE_INVALID).
  nlohmann::json call(const std::string& action, const nlohmann::json& request,
                      std::chrono::milliseconds extra_timeout = std::chrono::milliseconds(0));

  /// CreateQueue (idempotent for the same attributes); returns the queue URL.
  std::string create_queue(const std::string& name, const std::map<std::string, std::string>& attributes = {});
  std::string send_message(const std::string& queue_url, const std::string& body,
                           const MessageAttributes& attributes = {});
  BatchResult send_message_batch(const std::string& queue_url, const std::vector<SendEntry>& entries);
  /// Blocks up to options.wait_seconds when the queue is empty (long poll).
  std::vector<SqsMessage> receive_message(const std::string& queue_url, const ReceiveOptions& options);
  BatchResult delete_message_batch(const std::string& queue_url, const std::vector<DeleteEntry>& entries);
  /// The named attributes ("All" for every one) as SQS returns them (all strings).
  std::map<std::string, std::string> get_queue_attributes(const std::string& queue_url,
                                                          const std::vector<std::string>& names);

  const SqsOptions& options() const noexcept { return options_; }

 private:
  struct Curl;
  SqsOptions options_;
  std::unique_ptr<Curl> curl_;
};

}  // namespace boxcar::examples::sqs

// Per-key ordering of a consumer's receipts (docs/ordering.md). Opt in per consumer:
//
//   InboxOptions{.consumers = {"orders.projection.v1"},
//                .ordering = {{"orders.projection.v1",
//                              {.key = OrderingKey::payload_pointer("/order/id"),
//                               .head_of_line = HeadOfLine::park_after(5)}}}};
//
// Then at most one receipt of a key is claimable or in flight, across every worker
// process, and the key's receipts run in the order they were accepted.
#pragma once

#include <optional>
#include <string>

namespace boxcar {

/// Where a message's ordering key comes from.
class OrderingKey {
 public:
  /// A header of AcceptRequest::metadata.headers, e.g. "aggregate-id".
  static OrderingKey metadata_header(std::string name);
  /// A value of the payload by RFC 6901 JSON Pointer, e.g. "/order/id": a string, or an
  /// integer (its decimal text), however typed: 5.0 is the integer 5.
  static OrderingKey payload_pointer(std::string pointer);

  bool from_payload() const noexcept { return from_payload_; }
  /// The header name, or the pointer.
  const std::string& path() const noexcept { return path_; }
  /// The field accept() names in its errors: "metadata.headers/<name>" or
  /// "payload<pointer>", as for the other fields of a request.
  std::string field() const;

 private:
  OrderingKey(bool from_payload, std::string path) : from_payload_(from_payload), path_(std::move(path)) {}
  bool from_payload_ = false;
  std::string path_;
};

/// What a key's head that keeps failing does to the receipts behind it; recorded on each
/// receipt when it is accepted.
class HeadOfLine {
 public:
  /// Strict: the head retries until its attempts run out and then stays DEAD, and the
  /// key stays blocked until an operator replays, unblocks or discards it.
  static HeadOfLine block() noexcept { return HeadOfLine(std::nullopt); }
  /// The head becomes DEAD after `attempts` attempts (or the worker's max_attempts, if
  /// fewer), and a DEAD receipt of the key never blocks it: the key moves on.
  /// @throws ConfigError unless attempts >= 1.
  static HeadOfLine park_after(int attempts);

  /// nullopt: block.
  std::optional<int> park_after_attempts() const noexcept { return park_after_; }

 private:
  explicit HeadOfLine(std::optional<int> park_after) : park_after_(park_after) {}
  std::optional<int> park_after_;
};

struct OrderingRule {
  OrderingKey key;
  HeadOfLine head_of_line = HeadOfLine::block();
};

}  // namespace boxcar

// Errors thrown by accept()/accept_many(), and what a transport does with each:
//
//   InboxValidationError  reject / dead-letter the delivery; retrying cannot help
//   InboxConflictError    reject / dead-letter: the identity was reused for other content
//   InboxStorageError     do not acknowledge; redeliver the same identity later
#pragma once

#include <string>

#include "boxcar/core/error.hpp"

namespace boxcar {

/// The request is malformed. `field()` names it: "source", "consumer", "message_id",
/// "scope.id", "event_type", "schema_version", "metadata.headers/<name>", or
/// "payload" followed by the JSON Pointer of the offending value ("payload/items/3").
/// Codes: INBOX_FIELD_REQUIRED, INBOX_FIELD_TOO_LONG, INBOX_FIELD_INVALID (bad UTF-8 or
/// U+0000), INBOX_SCOPE_INVALID, INBOX_UNKNOWN_CONSUMER, INBOX_SCHEMA_VERSION_INVALID,
/// INBOX_ITEM_TOO_LARGE (field "payload": the item alone exceeds
/// InboxOptions::max_statement_bytes, so no statement could ever carry it),
/// and for payloads the JSON_* codes of JsonValueError (JSON_TOO_DEEP, ...).
class InboxValidationError final : public Error {
 public:
  InboxValidationError(std::string code, std::string field, const std::string& message)
      : Error(std::move(code), field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// The identity is already retained with a different fingerprint. The stored record is
/// unchanged. Code: IDENTITY_CONFLICT.
class InboxConflictError final : public Error {
 public:
  InboxConflictError(std::int64_t existing_id, const std::string& message)
      : Error("IDENTITY_CONFLICT", message), existing_id_(existing_id) {}
  std::int64_t existing_id() const noexcept { return existing_id_; }

 private:
  std::int64_t existing_id_;
};

/// The database could not record the message. When `uncertain()` the connection was lost
/// while the write may have committed: redeliver the same identity, and accept() will
/// answer Duplicate if it landed and Accepted if it did not.
/// Codes: STORAGE_UNCERTAIN, STORAGE_FAILURE.
class InboxStorageError final : public Error {
 public:
  InboxStorageError(const std::string& message, std::string sqlstate, bool uncertain)
      : Error(uncertain ? "STORAGE_UNCERTAIN" : "STORAGE_FAILURE", message),
        sqlstate_(std::move(sqlstate)),
        uncertain_(uncertain) {}
  bool uncertain() const noexcept { return uncertain_; }
  const std::string& sqlstate() const noexcept { return sqlstate_; }

 private:
  std::string sqlstate_;
  bool uncertain_;
};

}  // namespace boxcar

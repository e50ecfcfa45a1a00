// The root of Boxcar's error hierarchy: every error Boxcar throws carries a stable
// code string that callers branch on instead of parsing messages.
//
//   boxcar::Error (std::runtime_error)
//   ├── PermanentError       (various)             retrying cannot help: a handler that lets
//   │                                              one escape makes its receipt DEAD at once
//   │   ├── InboxPermanentError   HANDLER_PERMANENT
//   │   └── OutboxValidationError OUTBOX_*, JSON_*
//   ├── ConfigError          CONFIG_INVALID        a setting is missing or malformed (key())
//   ├── JsonValueError       JSON_*                a value is not plain, fingerprintable JSON (path())
//   ├── DatabaseError        DATABASE_*            a database call failed (uncertain())
//   ├── MigrationError       MIGRATION_*           the schema cannot be brought up to date
//   └── inbox errors         see boxcar/inbox/errors.hpp
#pragma once

#include <stdexcept>
#include <string>

namespace boxcar {

class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}

  /// Stable, documented identifier of the failure (e.g. "IDENTITY_CONFLICT").
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

/// An error that no retry can fix: the same input fails the same way every time (a
/// malformed event, a misused API, bad business data). The worker sends a receipt whose
/// handler throws one to DEAD at once instead of spending its retry budget.
class PermanentError : public Error {
 public:
  using Error::Error;
};

/// A configuration value is missing or malformed. `key()` names it
/// (e.g. "BOXCAR_DATABASE_URL", "pool.size").
class ConfigError final : public Error {
 public:
  ConfigError(std::string key, const std::string& message)
      : Error("CONFIG_INVALID", key + ": " + message), key_(std::move(key)) {}
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

/// A JSON value cannot be canonicalised or fingerprinted exactly.
/// `path()` is an RFC 6901 JSON Pointer to the offending value ("" is the root).
/// Codes: JSON_NON_FINITE_NUMBER, JSON_INTEGER_OUT_OF_RANGE, JSON_UNSUPPORTED_VALUE,
/// JSON_INVALID_UTF8, JSON_NUL_CHARACTER, JSON_TOO_DEEP, JSON_TOO_LARGE,
/// JSON_DUPLICATE_KEY, JSON_PARSE_ERROR.
class JsonValueError final : public Error {
 public:
  JsonValueError(std::string code, std::string path, const std::string& message)
      : Error(std::move(code), message + " at '" + path + "'"), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

/// A database call failed. `uncertain()` is true when the connection was lost while a
/// commit may have been in flight: the write may or may not have landed.
/// `sqlstate()` is the server's SQLSTATE when it sent one.
/// Codes: DATABASE_UNAVAILABLE, DATABASE_ERROR, DATABASE_COMMIT_UNCERTAIN, DATABASE_POOL_TIMEOUT.
class DatabaseError final : public Error {
 public:
  DatabaseError(std::string code, const std::string& message, std::string sqlstate = {}, bool uncertain = false)
      : Error(std::move(code), message), sqlstate_(std::move(sqlstate)), uncertain_(uncertain) {}
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  bool uncertain() const noexcept { return uncertain_; }

 private:
  std::string sqlstate_;
  bool uncertain_;
};

/// The schema cannot be migrated. Codes: MIGRATION_CHECKSUM_MISMATCH (an applied file
/// changed), MIGRATION_UNKNOWN_VERSION (the database is ahead of this binary),
/// MIGRATION_FAILED (a migration's SQL failed; its transaction rolled back),
/// MIGRATION_SCHEMA_UNSAFE (PUBLIC may CREATE in the schema), and the lock codes of
/// migrate().
class MigrationError final : public Error {
 public:
  using Error::Error;
};

}  // namespace boxcar

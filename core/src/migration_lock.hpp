// The migration runner's session lock: a bounded wait for the per-schema advisory lock,
// and a check, before every step, that this session still holds it.
#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <string>

namespace boxcar::detail {

class MigrationLock {
 public:
  /// Takes the lock on `connection`, which must not reactivate silently (a new backend
  /// would not hold it). Polls with backoff for at most `wait`.
  /// @throws MigrationError MIGRATION_LOCK_BUSY naming the holder(s).
  MigrationLock(pqxx::connection& connection, std::string schema, std::chrono::milliseconds wait);
  /// Releases the lock; a session that is gone released it already.
  ~MigrationLock();
  MigrationLock(const MigrationLock&) = delete;
  MigrationLock& operator=(const MigrationLock&) = delete;

  /// @throws MigrationError MIGRATION_LOCK_LOST when the session is gone or no longer
  ///   holds the lock.
  void verify_held() const;

  std::chrono::milliseconds waited() const noexcept { return waited_; }
  int backend_pid() const noexcept { return backend_pid_; }

 private:
  pqxx::connection& connection_;
  std::string schema_;
  std::chrono::milliseconds waited_{0};
  int backend_pid_ = 0;
};

}  // namespace boxcar::detail

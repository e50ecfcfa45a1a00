// The inbox's named statements, for the test that prepares every component's SQL.
#include "boxcar/inbox/detail/named_statements.hpp"

#include "inbox_queries.hpp"
#include "worker_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> inbox_statements() {
  return {{"inbox.insert", inbox_sql::kInsert},
          {"inbox.insert_ride", inbox_sql::kInsertRide},
          {"inbox.lookup", inbox_sql::kLookup},
          {"inbox.insert_many", inbox_sql::kInsertMany},
          {"inbox.insert_many_ride", inbox_sql::kInsertManyRide},
          {"inbox.lookup_many", inbox_sql::kLookupMany},
          {"worker.claim", worker_sql::kClaim},
          {"worker.claim_fair", worker_sql::kClaimFair},
          {"worker.claim_suspect", worker_sql::kClaimSuspect},
          {"worker.suspect_due", worker_sql::kSuspectDue},
          {"worker.start_solo", worker_sql::kStartSolo},
          {"worker.release_expired", worker_sql::kReleaseExpired},
          {"worker.terminate_backend", worker_sql::kTerminateBackend},
          {"worker.lock", worker_sql::kLock},
          {"worker.lock_many", worker_sql::kLockMany},
          {"worker.complete", worker_sql::kComplete},
          {"worker.complete_many", worker_sql::kCompleteMany},
          {"worker.transaction_ended", worker_sql::kTransactionEnded},
          {"worker.fail", worker_sql::kFail},
          {"worker.hand_back", worker_sql::kHandBack},
          {"worker.hand_back_in_outage", worker_sql::kHandBackInOutage},
          {"worker.outage_probe_session", worker_sql::kOutageProbeSession},
          {"worker.outage_probe_write", worker_sql::kOutageProbeWrite},
          {"worker.renew_leases", worker_sql::kRenewLeases},
          {"worker.set_tenant", worker_sql::kSetTenant}};
}

}  // namespace boxcar::detail

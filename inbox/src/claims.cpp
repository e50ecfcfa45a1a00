// Taking, renewing and handing back a worker's claims.
#include "claims.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/failpoint.hpp"

namespace boxcar::detail {

Claims::Claims(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats, WorkQueue& work,
               std::shared_ptr<spdlog::logger> log)
    : store_(store), options_(options), stats_(stats), work_(work), log_(std::move(log)) {}

std::vector<ClaimedReceipt> Claims::claim(OwnedConsumer& consumer, std::size_t limit) {
  std::lock_guard lane(consumer.lane);
  ++statements_;
  if (options_.metrics) options_.metrics->claim_statement(consumer.name);
  const auto sent = Clock::now();
  std::vector<ClaimedReceipt> got;
  if (options_.fair_claims) {
    auto fair = store_.claim_fair(consumer.name, limit, options_.lease, consumer.cursor);
    consumer.cursor = std::move(fair.next);
    got = std::move(fair.claims);
  } else {
    got = store_.claim(consumer.name, limit, options_.lease);
  }
  if (options_.on_claim)
    options_.on_claim(consumer.name, got.size(), std::chrono::duration<double>(Clock::now() - sent).count());
  return got;
}

void Claims::count_claimed(const std::string& consumer, const std::vector<ClaimedReceipt>& got) {
  if (got.empty()) return;
  BOXCAR_FAILPOINT("worker.after_claim");
  stats_.claimed += got.size();
  if (options_.metrics) options_.metrics->claimed(consumer, got.size());
}

void Claims::renew_running_out(std::deque<ClaimedReceipt>& waiting, Clock::time_point needed_until) {
  // The renewal reads only id and claim token: the copies leave the payloads behind.
  std::vector<ClaimedReceipt> running_out;
  {
    std::lock_guard q(work_.mutex);
    for (const auto& r : waiting)
      if (r.lease_until < needed_until) {
        ClaimedReceipt& copy = running_out.emplace_back();
        copy.id = r.id;
        copy.claim_token = r.claim_token;
      }
  }
  if (running_out.empty()) return;
  std::vector<const ClaimedReceipt*> receipts;
  std::vector<std::int64_t> renewed;
  for (const auto& r : running_out) {
    receipts.push_back(&r);
    renewed.push_back(r.id);
  }
  std::sort(renewed.begin(), renewed.end());
  const auto sent = Clock::now();
  try {
    store_.renew_leases(receipts, options_.lease);
  } catch (const std::exception& e) {
    // Left as they are: a claim whose lease runs out finds its lock refused, and lease
    // recovery re-runs the receipt.
    log_->warn("could not renew the leases of {} waiting receipts: {}", receipts.size(), e.what());
    return;
  }
  std::lock_guard q(work_.mutex);
  for (auto& r : waiting)
    if (std::binary_search(renewed.begin(), renewed.end(), r.id)) r.lease_until = sent + options_.lease;
}

void Claims::hand_back(const std::vector<ClaimedReceipt>& receipts) {
  if (receipts.empty()) return;
  try {
    const auto n = store_.hand_back(receipts);
    stats_.handed_back += n;
    log_->info("handed back {} claimed but unstarted receipts", n);
  } catch (const std::exception& e) {
    log_->error("could not hand back {} receipts; their leases will expire: {}", receipts.size(), e.what());
  }
}

void Claims::hand_back_unstarted(std::vector<ClaimedReceipt> receipts) {
  {
    std::lock_guard q(work_.mutex);
    if (work_.stopping) receipts = work_.keep_unstarted_locked(std::move(receipts));
  }
  hand_back(receipts);
}

}  // namespace boxcar::detail

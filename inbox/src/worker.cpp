// The worker's threads: a dispatcher that claims (woken by NOTIFY, or polling), recovers
// expired leases, runs the suspect lane (one suspect at a time, once nothing else is
// queued or in flight), feeds a bounded local queue and renews the leases of claims that
// wait in it long; handler threads that drain it (with batch_size 1, a short run of
// consecutive claims each; with batch_size > 1, a batch each, and they claim their own
// batch while a consumer has a backlog and the queue is empty, so claims run in parallel);
// and a supervisor that puts the runs behind slow handlers back on the queue and abandons
// and replaces a handler thread whose handler ignores its deadline.
//
// Lifetime: a handler thread owns a reference to the Impl (and so to everything it
// touches: processor, store, stats, registry, pool, handlers, metrics), because an
// abandoned thread is detached and may return long after stop() and ~Worker.
#include "boxcar/inbox/worker.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <optional>
#include <set>
#include <thread>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/detail/wakeup_listener.hpp"
#include "claim_lanes.hpp"
#include "lease_rescuer.hpp"
#include "message_processor.hpp"
#include "receipt_store.hpp"

namespace boxcar {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A handler still running this long after its deadline (its signal fired, its query was
// cancelled) ignores cancellation: its thread is abandoned and replaced.
constexpr auto kAbandonAfter = 1s;
// How often the supervisor looks for such handlers.
constexpr auto kSupervisePeriod = 100ms;
// After the shutdown grace, how long stop() waits for handlers whose queries it cancelled
// before abandoning them.
constexpr auto kCancelWait = 2s;
// With batch_size 1 a handler thread takes up to this many consecutive claims from a deep
// queue and runs them one transaction after another. Neighbouring receipts share heap
// pages, and sixteen threads each locking and completing one of sixteen neighbours contend
// for them: a raw loop of Boxcar's statements fed from one shared queue ran at 0.92 of the
// same loop with a claim per thread (docs/benchmarks.md, "Claim lanes and runs").
constexpr std::size_t kRunLength = 4;
// A run's handler thread still busy with one message after this long gives the rest of
// its run back to the queue, where idle threads take it: a slow handler delays the
// messages behind it by at most this plus one supervisor period.
constexpr auto kRunStall = 100ms;

std::map<std::string, detail::HandlerEntry> validate(const WorkerOptions& options,
                                                     const std::vector<HandlerRegistration>& handlers,
                                                     std::vector<std::string>& owned) {
  validate_schema_name(options.schema, "schema");
  const std::set<std::string> declared(options.consumers.begin(), options.consumers.end());
  std::map<std::string, detail::HandlerEntry> by_consumer;
  for (const auto& registration : handlers) {
    if (!registration.handler && !registration.batch_handler)
      throw ConfigError("handlers", "the handler registered for '" + registration.consumer +
                                        "' is null (set handler, batch_handler, or both)");
    if (!declared.contains(registration.consumer))
      throw ConfigError("handlers", "a handler is registered for consumer '" + registration.consumer +
                                        "', which the module does not declare");
    if (registration.supports.empty())
      throw ConfigError(
          "handlers", "the handler of '" + registration.consumer + "' declares no (event type, schema version) pairs");
    if (!by_consumer
             .emplace(registration.consumer,
                      detail::HandlerEntry{registration.handler, registration.supports, registration.batch_handler})
             .second)
      throw ConfigError("handlers", "two handlers are registered for consumer '" + registration.consumer + "'");
  }
  if (!options.enabled) return by_consumer;
  if (options.owned_consumers.empty()) {
    // No explicit list: the worker owns every declared consumer, so a forgotten handler
    // fails here instead of leaving that consumer's backlog PENDING forever.
    if (options.consumers.empty())
      throw ConfigError("worker.consumers",
                        "the worker would own no consumer: the module declares none "
                        "(declare its consumers, or set worker.enabled = false)");
    for (const auto& consumer : options.consumers) {
      if (!by_consumer.contains(consumer))
        throw ConfigError("worker.consumers",
                          "consumer '" + consumer +
                              "' has no registered handler, and an enabled worker without "
                              "a worker.consumers list owns every declared consumer: register its handler, list "
                              "the consumers this worker owns in worker.consumers, or set worker.enabled = false");
      if (std::find(owned.begin(), owned.end(), consumer) == owned.end()) owned.push_back(consumer);
    }
  } else {
    for (const auto& consumer : options.owned_consumers) {
      if (!declared.contains(consumer))
        throw ConfigError("worker.consumers", "'" + consumer + "' is not a consumer the module declares");
      if (!by_consumer.contains(consumer))
        throw ConfigError("worker.consumers", "'" + consumer + "' has no registered handler");
      if (std::find(owned.begin(), owned.end(), consumer) == owned.end()) owned.push_back(consumer);
    }
  }
  if (!options.tenant_setting.empty() && !is_custom_setting_name(options.tenant_setting))
    throw ConfigError("worker.tenant_setting",
                      "expects a custom setting name such as app.tenant_id, got '" + options.tenant_setting + "'");
  if (options.concurrency == 0) throw ConfigError("worker.concurrency", "must be at least 1");
  if (options.batch_size == 0) throw ConfigError("worker.batch_size", "must be at least 1");
  if (options.claim_limit == 0) throw ConfigError("worker.claim_limit", "must be at least 1");
  if (options.max_attempts < 1) throw ConfigError("worker.max_attempts", "must be at least 1");
  if (options.max_outage_hand_backs < 0) throw ConfigError("worker.max_outage_hand_backs", "must be 0 or more");
  if (options.handler_timeout <= std::chrono::milliseconds(0))
    throw ConfigError("worker.handler_timeout_ms", "must be positive");
  // Also for batch_size > 1: a batch's deadline is handler_timeout, and the one-message
  // transactions that re-run a failed or timed-out batch renew the leases of the waiting
  // receipts before each, so no lease has to cover more than one transaction.
  if (options.lease < options.handler_timeout + std::chrono::seconds(1))
    throw ConfigError("worker.lease_ms",
                      "must exceed worker.handler_timeout_ms by at least 1 s, so a claim "
                      "cannot expire while its transaction may still commit");
  if (options.backoff.base.count() < 0) throw ConfigError("worker.backoff_base_ms", "must be 0 or more");
  if (options.backoff.cap < options.backoff.base)
    throw ConfigError("worker.backoff_cap_ms", "must be at least worker.backoff_base_ms");
  return by_consumer;
}

}  // namespace

// Handler threads and the dispatcher's claims share the pool: a smaller pool would
// starve them into DATABASE_POOL_TIMEOUT failures that look like handler errors.
bool check_pool(const ConnectionPool& pool, const WorkerOptions& options) {
  if (options.enabled && pool.options().size < options.concurrency + 1)
    throw ConfigError("pool.size", "must be at least worker.concurrency + 1 (" +
                                       std::to_string(options.concurrency + 1) + "), is " +
                                       std::to_string(pool.options().size));
  return true;
}

class Worker::Impl : public std::enable_shared_from_this<Worker::Impl> {
 public:
  Impl(std::shared_ptr<ConnectionPool> pool, WorkerOptions options, std::vector<HandlerRegistration> handlers)
      : pool_(pool ? std::move(pool) : throw ConfigError("worker.pool", "a connection pool is required")),
        options_(std::move(options)),
        handlers_(validate(options_, handlers, owned_)),
        pool_check_(check_pool(*pool_, options_)),
        store_(pool_, options_.schema),
        processor_(pool_, store_, handlers_, options_, stats_, in_flight_),
        rescuer_(store_, options_, stats_, handlers_),
        lanes_(owned_.size()),
        log_(logger("worker")) {
    if (!options_.enabled) owned_.clear();
  }

  void start() {
    std::lock_guard lock(lifecycle_);
    if (running_ || owned_.empty()) return;
    running_ = true;
    in_flight_.resume();  // a previous stop() cancelled every later signal
    {
      std::lock_guard q(queue_mutex_);
      stopping_ = false;
      dispatcher_claiming_ = true;
      supervising_ = true;
      backlogged_.assign(owned_.size(), false);
      for (std::size_t i = 0; i < options_.concurrency; ++i) spawn_handler_thread();
    }
    dispatcher_ = std::thread([this] { dispatch_loop(); });
    supervisor_ = std::thread([this] { supervise_loop(); });
    log_->info("worker started: consumers [{}], {} handler threads, batch size {}", fmt_consumers(),
               options_.concurrency, options_.batch_size);
  }

  void stop() {
    std::lock_guard lock(lifecycle_);
    if (!running_) return;
    {
      std::lock_guard q(queue_mutex_);
      stopping_ = true;
    }
    work_available_.notify_all();
    room_or_idle_.notify_all();
    dispatcher_.join();
    std::vector<detail::ClaimedReceipt> ready;
    {
      std::lock_guard q(queue_mutex_);  // with the dispatcher's last claim, if it pushed one
      dispatcher_claiming_ = false;
      ready = keep_unstarted_locked({std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end())});
      queue_.clear();
    }
    hand_back(ready);
    in_flight_.cancel_signals();
    {
      std::unique_lock q(queue_mutex_);
      room_or_idle_.wait_until(q, Clock::now() + options_.shutdown_grace, [&] { return busy_threads_ == 0; });
    }
    if (in_flight_.size() > 0) {
      log_->warn("shutdown grace of {} ms over: cancelling {} in-flight handler transactions",
                 options_.shutdown_grace.count(), in_flight_.size());
      in_flight_.cancel_queries();
    }
    // A handler that ignored the signal and the cancelled query would keep join() waiting
    // forever: give its thread up, like the supervisor does at a deadline.
    std::vector<Abandonment> abandoned;
    {
      std::unique_lock q(queue_mutex_);
      room_or_idle_.wait_until(q, Clock::now() + kCancelWait, [&] { return busy_threads_ == 0; });
      for (const auto& slot : std::vector(slots_))
        if (slot->busy)
          abandoned.push_back(
              abandon_locked(slot, "the shutdown grace",
                             in_flight_.abandon(slot->id, [&](pqxx::connection& c) { pool_->abandon_loan(c); })));
      supervising_ = false;
    }
    work_available_.notify_all();
    room_or_idle_.notify_all();
    supervisor_wakeup_.notify_all();
    for (auto& a : abandoned) report(a);
    supervisor_.join();
    for (auto& slot : slots_) slot->thread.join();
    slots_.clear();
    {
      // Kept for a claim that never ended: its thread was abandoned, and the leases of
      // whatever it claims expire.
      std::lock_guard q(queue_mutex_);
      ready = std::exchange(unstarted_at_stop_, {});
    }
    hand_back(ready);
    running_ = false;
    if (abandoned_total_ > 0)
      log_->error("worker stopped; {} handler threads were abandoned since start and may still be running",
                  abandoned_total_.load());
    else
      log_->info("worker stopped");
  }

  std::size_t drain() {
    detail::DeadlineWatchdog watchdog;
    std::size_t total = 0;
    while (true) {
      for (const auto& consumer : owned_) rescuer_.release_expired(consumer);
      // The suspect lane: drain() runs one message at a time, so each suspect runs alone.
      bool ran_suspect = false;
      for (const auto& consumer : owned_)
        while (auto suspect = store_.claim_suspect(consumer, options_.lease)) {
          ++total;
          ++stats_.claimed;
          ran_suspect = true;
          std::vector<detail::ClaimedReceipt> alone{std::move(*suspect)};
          processor_.process(alone, watchdog);
        }
      std::vector<detail::ClaimedReceipt> claimed;
      for (std::size_t index = 0; index < owned_.size(); ++index)
        for (auto& r : claim(index, options_.claim_limit)) claimed.push_back(std::move(r));
      if (claimed.empty()) {
        if (ran_suspect) continue;  // their outcomes may have made more due
        return total;
      }
      total += claimed.size();
      stats_.claimed += claimed.size();
      for (std::size_t i = 0; i < claimed.size(); i += options_.batch_size) {
        const auto end = std::min(claimed.size(), i + options_.batch_size);
        std::vector<detail::ClaimedReceipt> batch(std::make_move_iterator(claimed.begin() + static_cast<long>(i)),
                                                  std::make_move_iterator(claimed.begin() + static_cast<long>(end)));
        processor_.process(batch, watchdog);
      }
    }
  }

  const std::vector<std::string>& owned() const { return owned_; }
  WorkerStats stats() const {
    WorkerStats s = stats_.snapshot();
    s.abandoned_handlers = abandoned_total_.load();
    s.claim_statements = claim_statements_.load();
    s.handler_thread_claims = handler_thread_claims_.load();
    return s;
  }
  std::uint64_t abandoned_handlers() const { return abandoned_total_.load(); }

 private:
  // One handler thread. Guarded by queue_mutex_, except `thread`, which only the
  // lifecycle (start/stop, under lifecycle_) and the abandoning thread touch.
  struct Slot {
    std::thread thread;
    std::thread::id id;
    bool busy = false;
    bool abandoned = false;
    // What the thread is processing while busy (its own local batch), read only under
    // queue_mutex_ and only to describe an abandonment: formatting identities for every
    // message would put string work on the hot path for a rare log line.
    const std::vector<detail::ClaimedReceipt>* batch = nullptr;
    // With batch_size 1: the claims the thread took to run after its current one.
    std::deque<detail::ClaimedReceipt> run;
    // When the thread began its current message (or batch).
    Clock::time_point started;
  };

  // The identities of a batch, comma-separated, for the log line of an abandonment.
  struct Identities {
    std::string consumers, message_ids, receipt_ids, attempts;
  };

  // A thread given up on, reported outside the queue lock.
  struct Abandonment {
    std::shared_ptr<Slot> slot;
    Identities identities;
    std::string cause;
    std::optional<detail::InFlightRegistry::Abandoned> attempt;
    // The rest of the thread's run, never started: handed back.
    std::vector<detail::ClaimedReceipt> unstarted;
  };

  std::string fmt_consumers() const {
    std::string s;
    for (const auto& c : owned_) s += (s.empty() ? "" : ", ") + c;
    return s;
  }

  // Claimed-but-unstarted work is bounded: room for every handler thread to take two
  // batches, or two runs with batch_size 1, and never less than two full claims. A claim
  // is a commit that waits for its WAL flush; refilled at half, the queue takes claim_limit
  // receipts a claim, so one flush serves that many messages (docs/benchmarks.md, "Claims
  // amortised"). Claims that wait long have their leases renewed
  // (renew_leases_running_out).
  std::size_t queue_capacity() const {
    return std::max(options_.concurrency * (options_.batch_size > 1 ? options_.batch_size : kRunLength) * 2,
                    2 * options_.claim_limit);
  }
  // The dispatcher refills a busy queue once it is down to half: one claim of half the
  // capacity instead of a claim, and a dispatcher wake-up, for every message taken.
  std::size_t refill_level() const { return queue_capacity() / 2; }

  // Under queue_mutex_: whether a lease in `waiting` may end before `needed_until`.
  static bool runs_out_locked(const std::deque<detail::ClaimedReceipt>& waiting, Clock::time_point needed_until) {
    return std::any_of(waiting.begin(), waiting.end(), [&](const auto& r) { return r.lease_until < needed_until; });
  }
  // A run's claims wait out the transaction of the message before them: one deadline, and
  // the grace before an ignoring handler is abandoned.
  Clock::time_point run_needed_until() const { return Clock::now() + options_.handler_timeout + kAbandonAfter; }

  // Renews, in one statement outside the lock, the leases of the receipts in `waiting` (the
  // queue, or a thread's run; guarded by queue_mutex_) that may end before
  // `needed_until`, and moves their lease_until on. Only claims that waited long need it,
  // so it usually finds none and sends nothing.
  void renew_leases_running_out(std::deque<detail::ClaimedReceipt>& waiting, Clock::time_point needed_until) {
    // The renewal reads only id and claim token: the copies leave the payloads behind.
    std::vector<detail::ClaimedReceipt> running_out;
    {
      std::lock_guard q(queue_mutex_);
      for (const auto& r : waiting)
        if (r.lease_until < needed_until) {
          detail::ClaimedReceipt& copy = running_out.emplace_back();
          copy.id = r.id;
          copy.claim_token = r.claim_token;
        }
    }
    if (running_out.empty()) return;
    std::vector<const detail::ClaimedReceipt*> receipts;
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
    std::lock_guard q(queue_mutex_);
    for (auto& r : waiting)
      if (std::binary_search(renewed.begin(), renewed.end(), r.id)) r.lease_until = sent + options_.lease;
  }

  // Under queue_mutex_, once stop() has begun: keeps `receipts` (unstarted) until no claim
  // can be under way, and then returns every receipt kept, to be handed back outside the
  // lock. A claim that started before stop() could otherwise take a receipt handed back
  // meanwhile, and it would be handed back twice (counted twice in stats().handed_back).
  std::vector<detail::ClaimedReceipt> keep_unstarted_locked(std::vector<detail::ClaimedReceipt> receipts) {
    for (auto& r : receipts) unstarted_at_stop_.push_back(std::move(r));
    if (dispatcher_claiming_ || handler_claims_running_ > 0) return {};
    return std::exchange(unstarted_at_stop_, {});
  }

  // Hands back claims that will not run: directly while the worker runs, through
  // keep_unstarted_locked once stop() has begun.
  void hand_back_unstarted(std::vector<detail::ClaimedReceipt> receipts) {
    {
      std::lock_guard q(queue_mutex_);
      if (stopping_) receipts = keep_unstarted_locked(std::move(receipts));
    }
    hand_back(receipts);
  }

  void hand_back(const std::vector<detail::ClaimedReceipt>& receipts) {
    if (receipts.empty()) return;
    try {
      const auto n = store_.hand_back(receipts);
      stats_.handed_back += n;
      log_->info("handed back {} claimed but unstarted receipts", n);
    } catch (const std::exception& e) {
      log_->error("could not hand back {} receipts; their leases will expire: {}", receipts.size(), e.what());
    }
  }

  // Claims for every owned consumer due a claim (notified, polled, or left with more to
  // claim by the last round), in turn; returns how many it claimed, and sets
  // `found_queue_full` when it stopped for want of room (then there may be more to claim
  // as soon as a handler takes from the queue). A consumer whose claim came back short
  // has nothing more due: it waits for its next notification or poll. Never claims
  // suspects.
  std::size_t claim_round(bool& found_queue_full) {
    std::size_t claimed = 0;
    found_queue_full = false;
    for (std::size_t i = 0; i < owned_.size(); ++i) {
      const std::size_t index = (next_consumer_ + i) % owned_.size();
      if (!claim_due_[index]) continue;
      std::size_t room;
      {
        std::lock_guard q(queue_mutex_);
        if (stopping_) return claimed;
        room = queue_capacity() > queue_.size() ? queue_capacity() - queue_.size() : 0;
      }
      if (room == 0) {
        found_queue_full = true;
        break;
      }
      const std::size_t limit = std::min(room, options_.claim_limit);
      auto got = claim(index, limit);
      // Short means nothing more is due, for the fair claim too: it fills a short share
      // with the oldest due receipts.
      if (got.size() < limit) claim_due_[index] = false;
      claimed += enqueue(index, got, got.size() == limit);
    }
    next_consumer_ = (next_consumer_ + 1) % owned_.size();
    return claimed;
  }

  // One claim statement for owned_[index], counted: the stat and metric show what
  // wake-ups cost. It waits for the consumer's claim lane: the dispatcher's claims and
  // the handler threads' own run one at a time per consumer. Fair
  // (WorkerOptions::fair_claims) shares the limit out over the consumer's scopes, round
  // robin from where its last fair claim ended.
  std::vector<detail::ClaimedReceipt> claim(std::size_t index, std::size_t limit) {
    return lanes_.run(index, [&](detail::ScopeCursor& cursor) {
      const std::string& consumer = owned_[index];
      ++claim_statements_;
      if (options_.metrics) options_.metrics->claim_statement(consumer);
      if (!options_.fair_claims) return store_.claim(consumer, limit, options_.lease);
      auto fair = store_.claim_fair(consumer, limit, options_.lease, cursor);
      cursor = std::move(fair.next);
      return std::move(fair.claims);
    });
  }

  // Dispatcher-only bookkeeping of which owned consumers the next round claims for.
  void mark_all_due() { std::fill(claim_due_.begin(), claim_due_.end(), true); }
  bool any_due() const { return std::find(claim_due_.begin(), claim_due_.end(), true) != claim_due_.end(); }
  // A notification's payload is its consumer; an empty one (`dead retry`, a hand-written
  // NOTIFY) stands for every consumer.
  void mark_notified(const std::string& payload) {
    if (payload.empty()) return mark_all_due();
    const auto it = std::find(owned_.begin(), owned_.end(), payload);
    if (it != owned_.end()) claim_due_[static_cast<std::size_t>(it - owned_.begin())] = true;
  }
  bool owns_or_all(const std::string& payload) const {
    return payload.empty() || std::find(owned_.begin(), owned_.end(), payload) != owned_.end();
  }

  // Puts claims of owned_[index] on the local queue for the handler threads; returns how
  // many. `full`: the claim came back full, so the consumer has a backlog that idle
  // handler threads may claim from themselves.
  std::size_t enqueue(std::size_t index, std::vector<detail::ClaimedReceipt>& got, bool full) {
    count_claimed(owned_[index], got);
    {
      std::lock_guard q(queue_mutex_);
      backlogged_[index] = full;
      for (auto& r : got) queue_.push_back(std::move(r));
    }
    work_available_.notify_all();
    return got.size();
  }

  void count_claimed(const std::string& consumer, const std::vector<detail::ClaimedReceipt>& got) {
    if (got.empty()) return;
    BOXCAR_FAILPOINT("worker.after_claim");
    stats_.claimed += got.size();
    if (options_.metrics) options_.metrics->claimed(consumer, got.size());
  }

  // Under queue_mutex_: an owned consumer whose last claim came back full, round robin,
  // while the queue is empty and no suspect runs alone. Only with batch_size > 1: a claim
  // per message would double the statements of one-message transactions, which the
  // dispatcher's claims of claim_limit already keep busy.
  std::optional<std::size_t> backlogged_consumer_locked() {
    if (options_.batch_size < 2 || suspect_lane_ || !queue_.empty()) return std::nullopt;
    for (std::size_t i = 0; i < backlogged_.size(); ++i) {
      const std::size_t index = (next_self_claim_ + i) % backlogged_.size();
      if (!backlogged_[index]) continue;
      next_self_claim_ = (index + 1) % backlogged_.size();
      return index;
    }
    return std::nullopt;
  }

  // A handler thread's own claim of one batch of owned_[index], made while it counts as
  // busy (so the suspect lane waits for it). The dispatcher's due flags are untouched: a
  // short claim here only ends the backlog hint, never a pending wake-up.
  std::vector<detail::ClaimedReceipt> claim_for_self(std::size_t index) {
    const std::size_t limit = std::min(options_.batch_size, options_.claim_limit);
    std::vector<detail::ClaimedReceipt> got;
    try {
      ++handler_thread_claims_;
      got = claim(index, limit);
    } catch (const std::exception& e) {
      log_->warn("a handler thread's claim for '{}' failed; the dispatcher claims instead: {}", owned_[index],
                 e.what());
    }
    count_claimed(owned_[index], got);
    std::lock_guard q(queue_mutex_);
    if (got.size() < limit) backlogged_[index] = false;
    return got;
  }

  // The dispatcher is the only writer and writes under queue_mutex_, so it may read the
  // flag without the lock; handler threads read it under the lock.
  void set_suspect_lane(bool open) {
    {
      std::lock_guard q(queue_mutex_);
      suspect_lane_ = open;
    }
    // Closing it lets idle handler threads claim a backlog for themselves again.
    if (!open) work_available_.notify_all();
  }

  // Lease recovery for every owned consumer: expired claims go back as suspects (or DEAD),
  // whatever room the queue has. Enters the suspect lane when a suspect is due.
  void recover() {
    for (const auto& consumer : owned_) {
      rescuer_.release_expired(consumer);
      if (!suspect_lane_ && store_.suspect_due(consumer)) set_suspect_lane(true);
    }
  }

  // Under queue_mutex_: nothing queued and no handler thread busy in this process.
  bool idle_locked() const { return queue_.empty() && busy_threads_ == 0; }

  // The suspect lane, called only while idle: claims one due suspect (round robin over the
  // owned consumers) and queues it; nothing else is claimed until its run is over, so it
  // runs alone. Returns false when no suspect is due.
  bool claim_suspect() {
    for (std::size_t i = 0; i < owned_.size(); ++i) {
      const std::size_t index = (next_suspect_consumer_ + i) % owned_.size();
      auto suspect = store_.claim_suspect(owned_[index], options_.lease);
      if (!suspect) continue;
      next_suspect_consumer_ = (index + 1) % owned_.size();
      std::vector<detail::ClaimedReceipt> one;
      one.push_back(std::move(*suspect));
      enqueue(index, one, false);
      return true;
    }
    return false;
  }

  // Claims only for consumers with something due: a notification naming an owned
  // consumer wakes the loop for that consumer alone (other consumers' notifications are
  // ignored inside the listener), and every poll_interval the lease recovery tick polls
  // them all (docs/worker.md, "Wake-ups").
  void dispatch_loop() {
    detail::WakeupListener wakeups(pool_->session_connection_string(), Inbox::notify_channel(options_.schema), log_);
    auto next_recovery = Clock::now();
    claim_due_.assign(owned_.size(), true);
    while (true) {
      {
        // A full queue waits for room, the suspect lane for an idle process; neither waits
        // past the next lease recovery.
        std::unique_lock q(queue_mutex_);
        room_or_idle_.wait_until(q, next_recovery, [&] {
          return stopping_ || (suspect_lane_ ? idle_locked() : queue_.size() <= refill_level());
        });
        if (stopping_) break;
      }
      // Newly listening: whatever was accepted before LISTEN sent no wake-up we can see.
      if (wakeups.ensure_listening()) mark_all_due();
      bool found_queue_full = false;
      try {
        if (Clock::now() >= next_recovery) {
          next_recovery = Clock::now() + options_.poll_interval;
          recover();
          // Until the tick after next, whatever a claim waits for in the queue.
          renew_leases_running_out(queue_, Clock::now() + 2 * options_.poll_interval);
          mark_all_due();  // the poll: retries whose backoff ended send no notification
        }
        if (suspect_lane_) {
          bool idle;
          {
            std::lock_guard q(queue_mutex_);
            idle = idle_locked();
          }
          // Not idle yet: claim nothing, wait for the queue and handlers to empty. Idle:
          // run the next suspect alone, or leave the lane when none is due.
          if (!idle || claim_suspect()) continue;
          set_suspect_lane(false);
        }
        claim_round(found_queue_full);
      } catch (const std::exception& e) {
        log_->error("claiming failed, retrying after {} ms: {}", options_.poll_interval.count(), e.what());
        sleep_unless_stopping(options_.poll_interval);
        continue;
      }
      // A consumer left with more to claim (a full claim, or a round stopped for want of
      // room): back to waiting for room. A round that found the queue full must not idle
      // below even if a handler has taken from the queue since, or the handlers would
      // drain it and then wait for a poll.
      if (found_queue_full || any_due()) continue;
      // Idle: sleep until a NOTIFY for an owned consumer arrives or the poll interval
      // passes; never busy-loop.
      const auto woke = wakeups.wait_until(
          std::min(next_recovery, Clock::now() + options_.poll_interval),
          [&] {
            std::lock_guard q(queue_mutex_);
            return stopping_;
          },
          [&](const std::string& payload) { return owns_or_all(payload); });
      if (woke.may_have_missed) mark_all_due();
      for (const auto& payload : woke.payloads) mark_notified(payload);
    }
  }

  void sleep_unless_stopping(std::chrono::milliseconds duration) {
    std::unique_lock q(queue_mutex_);
    room_or_idle_.wait_for(q, duration, [&] { return stopping_; });
  }

  // Under queue_mutex_. The thread holds the Impl and its slot, so it may outlive both
  // stop() and ~Worker once abandoned.
  void spawn_handler_thread() {
    auto slot = std::make_shared<Slot>();
    slot->thread = std::thread([self = shared_from_this(), slot] { self->handle_loop(*slot); });
    slot->id = slot->thread.get_id();
    slots_.push_back(std::move(slot));
  }

  void handle_loop(Slot& slot) {
    detail::DeadlineWatchdog watchdog;
    while (true) {
      std::vector<detail::ClaimedReceipt> batch;
      std::optional<std::size_t> self_claim;
      std::size_t queue_level = 0;
      bool run_needs_renewal = false;
      {
        std::unique_lock q(queue_mutex_);
        work_available_.wait(q, [&] {
          return stopping_ || slot.abandoned || !queue_.empty() || (self_claim = backlogged_consumer_locked());
        });
        if (stopping_ || slot.abandoned) return;
        take_locked(slot, batch);
        run_needs_renewal = runs_out_locked(slot.run, run_needed_until());
        queue_level = queue_.size();
        slot.batch = &batch;
        slot.busy = true;
        slot.started = Clock::now();
        ++busy_threads_;
        if (self_claim) ++handler_claims_running_;
      }
      if (self_claim) {
        auto got = claim_for_self(*self_claim);
        std::unique_lock q(queue_mutex_);
        --handler_claims_running_;
        // Claimed while stop() ran: as unstarted as the queue's, so handed back with them.
        if (stopping_) {
          auto ready = keep_unstarted_locked(std::move(got));
          got.clear();
          q.unlock();
          hand_back(ready);
          q.lock();
        }
        if (got.empty() || slot.abandoned) {
          if (!slot.abandoned) {
            slot.batch = nullptr;
            slot.busy = false;
            --busy_threads_;
          }
          q.unlock();
          room_or_idle_.notify_all();
          if (slot.abandoned) return;
          continue;
        }
        batch = std::move(got);  // under the lock: an abandonment may describe it
      } else if (queue_level <= refill_level()) {
        room_or_idle_.notify_all();  // the dispatcher refills
      }
      std::vector<detail::ClaimedReceipt> unstarted;
      bool idle = false;
      while (true) {
        if (run_needs_renewal) renew_leases_running_out(slot.run, run_needed_until());
        processor_.process(batch, watchdog);
        std::lock_guard q(queue_mutex_);
        if (slot.abandoned) {
          // Replaced long ago; the attempt's outcome was recorded as a timeout (or went
          // stale) by process(), and its run was handed back. Nothing else of the worker
          // is this thread's any more.
          const Identities ids = describe(batch);
          log_event(*log_, LogLevel::Warn, "an abandoned handler returned; its thread ends",
                    {{"consumer", ids.consumers},
                     {"message_id", ids.message_ids},
                     {"receipt_id", ids.receipt_ids},
                     {"attempt", ids.attempts}});
          return;
        }
        if (!slot.run.empty() && !stopping_) {
          batch.clear();
          batch.push_back(std::move(slot.run.front()));
          slot.run.pop_front();
          slot.started = Clock::now();
          run_needs_renewal = runs_out_locked(slot.run, run_needed_until());
          continue;
        }
        // stop() began during the run: the rest was never started.
        if (stopping_)
          unstarted = keep_unstarted_locked(
              {std::make_move_iterator(slot.run.begin()), std::make_move_iterator(slot.run.end())});
        slot.run.clear();
        slot.batch = nullptr;
        slot.busy = false;
        idle = --busy_threads_ == 0;
        break;
      }
      hand_back(unstarted);
      // Only an idle process matters to the waiters: the suspect lane and stop().
      if (idle) room_or_idle_.notify_all();
    }
  }

  // Under queue_mutex_: what a handler thread takes from the queue. With batch_size > 1,
  // a batch. With batch_size 1, one message, and as many more to run after it (up to
  // kRunLength in all) as the queue holds for every handler thread; a shallow queue
  // gives one each, so no message waits behind another while a thread is idle.
  void take_locked(Slot& slot, std::vector<detail::ClaimedReceipt>& batch) {
    const auto take = [&] {
      auto r = std::move(queue_.front());
      queue_.pop_front();
      return r;
    };
    if (options_.batch_size > 1) {
      while (!queue_.empty() && batch.size() < options_.batch_size) batch.push_back(take());
      return;
    }
    if (queue_.empty()) return;
    const std::size_t run = std::clamp<std::size_t>(queue_.size() / options_.concurrency, 1, kRunLength);
    batch.push_back(take());
    while (slot.run.size() + 1 < run) slot.run.push_back(take());
  }

  // Under queue_mutex_: the runs of threads busy with one message for longer than
  // kRunStall go back to the front of the queue, in claim order, for idle threads. Not
  // once stop() has begun: no thread takes from the queue any more, and the run is handed
  // back when its thread returns or is abandoned.
  bool requeue_stalled_runs_locked(Clock::time_point now) {
    bool requeued = false;
    if (stopping_) return requeued;
    for (const auto& slot : slots_) {
      if (!slot->busy || slot->run.empty() || now - slot->started < kRunStall) continue;
      for (auto it = slot->run.rbegin(); it != slot->run.rend(); ++it) queue_.push_front(std::move(*it));
      slot->run.clear();
      requeued = true;
    }
    return requeued;
  }

  static Identities describe(const std::vector<detail::ClaimedReceipt>& batch) {
    Identities ids;
    std::set<std::string> consumers;
    for (const auto& r : batch) {
      const std::string sep = ids.message_ids.empty() ? "" : ",";
      if (consumers.insert(r.consumer).second) ids.consumers += (ids.consumers.empty() ? "" : ",") + r.consumer;
      ids.message_ids += sep + r.message_id;
      ids.receipt_ids += sep + std::to_string(r.id);
      ids.attempts += sep + std::to_string(r.attempt);
    }
    return ids;
  }

  // Finds handlers that ignore their deadline and gives their threads up.
  void supervise_loop() {
    while (true) {
      bool requeued;
      {
        std::unique_lock q(queue_mutex_);
        supervisor_wakeup_.wait_for(q, kSupervisePeriod, [&] { return !supervising_; });
        if (!supervising_) return;
        requeued = requeue_stalled_runs_locked(Clock::now());
      }
      if (requeued) work_available_.notify_all();
      for (const auto id : in_flight_.overdue(Clock::now() - kAbandonAfter)) {
        std::optional<Abandonment> abandoned;
        {
          std::lock_guard q(queue_mutex_);
          const auto it = std::find_if(slots_.begin(), slots_.end(), [&](const auto& s) { return s->id == id; });
          if (it == slots_.end()) continue;  // not a handler thread of ours (drain())
          // Only while the attempt is still running: it may have returned meanwhile.
          auto attempt = in_flight_.abandon(id, [&](pqxx::connection& c) { pool_->abandon_loan(c); });
          if (!attempt) continue;
          abandoned = abandon_locked(*it, "its deadline", attempt);
          if (!stopping_) spawn_handler_thread();
        }
        room_or_idle_.notify_all();
        report(*abandoned);
      }
    }
  }

  // Under queue_mutex_, for a busy slot: its thread is no longer the worker's. `attempt`
  // is its running attempt, already marked abandoned in the registry, whose connection
  // stopped counting in the pool while the registry guaranteed it was alive.
  Abandonment abandon_locked(const std::shared_ptr<Slot>& slot, std::string cause,
                             std::optional<detail::InFlightRegistry::Abandoned> attempt) {
    // The slot's batch is alive here: its thread is busy and cannot leave the batch's
    // scope without taking queue_mutex_, which we hold.
    Abandonment a{.slot = slot,
                  .identities = slot->batch ? describe(*slot->batch) : Identities{},
                  .cause = std::move(cause),
                  .attempt = attempt,
                  .unstarted = {std::make_move_iterator(slot->run.begin()), std::make_move_iterator(slot->run.end())}};
    slot->run.clear();
    slot->abandoned = true;
    if (slot->busy) --busy_threads_;
    slot->thread.detach();
    slots_.erase(std::find(slots_.begin(), slots_.end(), slot));
    ++abandoned_total_;
    return a;
  }

  // Outside the queue lock: hand back the rest of its run, count, log, and cut the
  // abandoned attempt's session, so a handler that keeps issuing statements cannot hold
  // its aborted transaction (and the receipt's row lock) open. Lease recovery then retries
  // the receipt or makes it DEAD.
  void report(Abandonment& a) {
    hand_back_unstarted(std::move(a.unstarted));
    if (options_.metrics) options_.metrics->abandoned_handler();
    std::string session = "no transaction open";
    if (a.attempt && a.attempt->session.backend_pid != 0) {
      try {
        const bool terminated = store_.terminate_backend(a.attempt->session);
        session = terminated ? "session terminated" : "session already gone";
      } catch (const std::exception& e) {
        session = std::string("could not terminate its session: ") + e.what();
      }
    }
    const Identities& ids = a.identities;
    log_event(*log_, LogLevel::Error,
              "handler thread abandoned: its handler ignored cancellation past " + a.cause +
                  "; a new thread replaces it and lease recovery retries the receipt",
              {{"outcome", "abandoned"},
               {"consumer", ids.consumers},
               {"message_id", ids.message_ids},
               {"receipt_id", ids.receipt_ids},
               {"attempt", ids.attempts},
               {"session", session}});
  }

  std::shared_ptr<ConnectionPool> pool_;
  WorkerOptions options_;
  std::vector<std::string> owned_;
  std::map<std::string, detail::HandlerEntry> handlers_;
  bool pool_check_;
  detail::ReceiptStore store_;
  detail::AtomicWorkerStats stats_;
  detail::InFlightRegistry in_flight_;
  detail::MessageProcessor processor_;
  detail::LeaseRescuer rescuer_;
  // Parallel to owned_: each consumer's claims one at a time, and where its next fair
  // claim starts its round robin.
  detail::ClaimLanes lanes_;
  std::shared_ptr<spdlog::logger> log_;
  std::atomic<std::uint64_t> abandoned_total_{0};
  std::atomic<std::uint64_t> claim_statements_{0};
  std::atomic<std::uint64_t> handler_thread_claims_{0};

  std::mutex lifecycle_;
  bool running_ = false;
  std::mutex queue_mutex_;
  // Two conditions, so that no queue change wakes threads with nothing to do: handler
  // threads wait for work (claims queued, a backlog to claim from, stop), the dispatcher
  // and stop() for room in the queue or an idle process (a take, a handler's end).
  std::condition_variable work_available_;
  std::condition_variable room_or_idle_;
  // The supervisor's own: it has nothing to do on the queue changes of every message.
  std::condition_variable supervisor_wakeup_;
  std::deque<detail::ClaimedReceipt> queue_;
  bool stopping_ = false;
  // From start() until stop() has joined the dispatcher: it may claim.
  bool dispatcher_claiming_ = false;
  // Handler threads' own claims under way (claim_for_self).
  std::size_t handler_claims_running_ = 0;
  // Unstarted claims that stop() hands back once no claim can take them again.
  std::vector<detail::ClaimedReceipt> unstarted_at_stop_;
  bool supervising_ = false;
  std::size_t busy_threads_ = 0;
  std::size_t next_consumer_ = 0;
  // Dispatcher-only, parallel to owned_: which consumers the next claim round claims for.
  std::vector<bool> claim_due_;
  // A suspect is due, so claim nothing else (handler threads included) and run suspects
  // one at a time once idle (docs/worker.md, "the suspect lane"). Written only by the
  // dispatcher, under queue_mutex_ (set_suspect_lane).
  bool suspect_lane_ = false;
  // Parallel to owned_: the last claim of the consumer came back full, so idle handler
  // threads claim a batch of it themselves instead of waiting for the dispatcher.
  std::vector<bool> backlogged_;
  std::size_t next_self_claim_ = 0;
  std::size_t next_suspect_consumer_ = 0;
  std::thread dispatcher_;
  std::thread supervisor_;
  std::vector<std::shared_ptr<Slot>> slots_;
};

Worker::Worker(std::shared_ptr<ConnectionPool> pool, WorkerOptions options, std::vector<HandlerRegistration> handlers)
    : impl_(std::make_shared<Impl>(std::move(pool), std::move(options), std::move(handlers))) {}

// Abandoned handler threads keep their own reference to the Impl; it ends with the last.
Worker::~Worker() { impl_->stop(); }
void Worker::start() { impl_->start(); }
void Worker::stop() { impl_->stop(); }
std::size_t Worker::drain() { return impl_->drain(); }
const std::vector<std::string>& Worker::owned_consumers() const noexcept { return impl_->owned(); }
WorkerStats Worker::stats() const { return impl_->stats(); }
std::uint64_t Worker::abandoned_handlers() const { return impl_->abandoned_handlers(); }

}  // namespace boxcar

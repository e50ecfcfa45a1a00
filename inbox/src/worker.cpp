// boxcar::Worker: the roles that process receipts, put together. Each has a file of its
// own (docs/architecture.md, "The worker's roles"):
//   claim_dispatcher  the dispatcher thread: wake-ups, claims (fair over scopes), lease
//                     recovery, the suspect lane;
//   claims            taking claims in one lane per consumer, renewing those that wait,
//                     handing back those that will not run;
//   handler_pool      the handler threads: batches and runs, self-claims, abandonment;
//   message_processor the handler transaction and its completion (batch handlers in
//                     batch_handler_processor), outcome_recorder what each outcome writes;
//   lease_rescuer     expired claims back as suspects;
//   supervisor        stalled runs, overdue handlers, and the graceful stop.
// They share the work queue (work_queue.hpp) and one OwnedConsumer per owned consumer.
//
// Lifetime: a handler thread owns a reference to the Impl (and so to everything it
// touches: processor, store, stats, registry, pool, handlers, metrics), because an
// abandoned thread is detached and may return long after stop() and ~Worker.
#include "boxcar/inbox/worker.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "claim_dispatcher.hpp"
#include "claims.hpp"
#include "handler_pool.hpp"
#include "lease_rescuer.hpp"
#include "message_processor.hpp"
#include "receipt_store.hpp"
#include "supervisor.hpp"
#include "work_queue.hpp"
#include "worker_options_check.hpp"

namespace boxcar {

class Worker::Impl : public std::enable_shared_from_this<Worker::Impl> {
 public:
  Impl(std::shared_ptr<ConnectionPool> pool, WorkerOptions options, std::vector<HandlerRegistration> handlers)
      : pool_(pool ? std::move(pool) : throw ConfigError("worker.pool", "a connection pool is required")),
        options_(std::move(options)),
        handlers_(detail::validate_worker(options_, handlers, owned_)),
        pool_check_(detail::check_worker_pool(*pool_, options_)),
        consumers_(make_consumers()),
        store_(pool_, options_.schema),
        processor_(pool_, store_, handlers_, options_, stats_, in_flight_),
        rescuer_(store_, options_, stats_, handlers_),
        log_(logger("worker")),
        work_(options_, consumers_),
        claims_(store_, options_, stats_, work_, log_),
        dispatcher_(pool_, options_, consumers_, work_, claims_, store_, rescuer_, log_),
        handler_pool_(options_, consumers_, work_, claims_, processor_, in_flight_, store_, pool_, log_),
        supervisor_(options_, work_, handler_pool_, dispatcher_, claims_, in_flight_, log_) {}

  void start() {
    std::lock_guard lock(lifecycle_);
    if (running_ || consumers_.empty()) return;
    running_ = true;
    in_flight_.resume();  // a previous stop() cancelled every later signal
    {
      std::lock_guard q(work_.mutex);
      work_.stopping = false;
      work_.dispatcher_claiming = true;
      work_.supervising = true;
      for (auto& consumer : consumers_) consumer->backlogged = false;
      handler_pool_.start_locked(shared_from_this());
    }
    dispatcher_.start();
    supervisor_.start();
    log_->info("worker started: consumers [{}], {} handler threads, batch size {}", fmt_consumers(),
               options_.concurrency, options_.batch_size);
  }

  void stop() {
    std::lock_guard lock(lifecycle_);
    if (!running_) return;
    supervisor_.shut_down();
    running_ = false;
    if (handler_pool_.abandoned_total() > 0)
      log_->error("worker stopped; {} handler threads were abandoned since start and may still be running",
                  handler_pool_.abandoned_total());
    else
      log_->info("worker stopped");
  }

  // On the caller's thread, one message at a time: each suspect runs alone.
  std::size_t drain() {
    detail::DeadlineWatchdog watchdog;
    std::size_t total = 0;
    for (;;) {
      for (const auto& consumer : consumers_) rescuer_.release_expired(consumer->name);
      bool ran_suspect = false;
      for (const auto& consumer : consumers_)
        while (auto suspect = store_.claim_suspect(consumer->name, options_.lease)) {
          ++total;
          ++stats_.claimed;
          ran_suspect = true;
          std::vector<detail::ClaimedReceipt> alone{std::move(*suspect)};
          processor_.process(alone, watchdog);
        }
      std::vector<detail::ClaimedReceipt> claimed;
      for (auto& consumer : consumers_)
        for (auto& r : claims_.claim(*consumer, options_.claim_limit)) claimed.push_back(std::move(r));
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
    s.abandoned_handlers = handler_pool_.abandoned_total();
    s.claim_statements = claims_.statements();
    s.handler_thread_claims = handler_pool_.handler_thread_claims();
    return s;
  }
  std::uint64_t abandoned_handlers() const { return handler_pool_.abandoned_total(); }

 private:
  // A disabled worker owns nothing: start() is a no-op.
  detail::OwnedConsumers make_consumers() {
    if (!options_.enabled) owned_.clear();
    detail::OwnedConsumers consumers;
    for (const auto& name : owned_) consumers.push_back(std::make_unique<detail::OwnedConsumer>(name));
    return consumers;
  }

  std::string fmt_consumers() const {
    std::string s;
    for (const auto& c : owned_) s += (s.empty() ? "" : ", ") + c;
    return s;
  }

  std::shared_ptr<ConnectionPool> pool_;
  WorkerOptions options_;
  std::vector<std::string> owned_;
  std::map<std::string, detail::HandlerEntry> handlers_;
  bool pool_check_;
  detail::OwnedConsumers consumers_;
  detail::ReceiptStore store_;
  detail::AtomicWorkerStats stats_;
  detail::InFlightRegistry in_flight_;
  detail::MessageProcessor processor_;
  detail::LeaseRescuer rescuer_;
  std::shared_ptr<spdlog::logger> log_;
  detail::WorkQueue work_;
  detail::Claims claims_;
  detail::ClaimDispatcher dispatcher_;
  detail::HandlerPool handler_pool_;
  detail::Supervisor supervisor_;

  std::mutex lifecycle_;
  bool running_ = false;
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

// The Runtime: builds the shared pool, metrics and components from RuntimeConfig and
// starts/stops the requested role.
#include "boxcar/runtime/runtime.hpp"

#include <mutex>
#include <optional>
#include <string>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/runtime/console_server.hpp"
#include "boxcar/runtime/http_server.hpp"
#include "boxcar/runtime/probes.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/migrate.hpp"
#include "database_probe.hpp"
#include "schema_readiness.hpp"

namespace boxcar {

namespace {

/// One readiness check, run by the ReadinessMonitor's thread (never by a probe). Its
/// inputs are separate: the database answers (database_probe), the schema it reports
/// is one this build serves (schema_readiness), the producer reaches a broker.
ReadinessReport check_readiness(detail::DatabaseProbe& database, const Publisher* publisher) {
  ReadinessReport report{.ready = true, .checks = {}, .detail = {}};
  const auto check = [&](const char* name, bool ok, const std::string& why) {
    report.checks.emplace_back(name, ok);
    if (ok) return;
    report.ready = false;
    report.detail += (report.detail.empty() ? "" : "; ") + why;
  };
  const auto answer = database.probe();
  check("database", answer.schema.has_value(), "database unreachable: " + answer.error);
  const auto schema = detail::schema_readiness(answer.schema);
  check("migrations", schema.ok, schema.why);
  if (publisher) check("kafka", publisher->kafka_connected(), "Kafka producer reaches no broker");
  return report;
}

}  // namespace

/// The probes of a started runtime, swapped as one piece so that a probe never sees
/// them half built (they are read without the runtime's mutex, which stop() holds for
/// seconds).
struct RuntimeProbes {
  std::shared_ptr<ReadinessMonitor> readiness;
  LivenessWatch liveness;
};

struct Runtime::Impl {
  RuntimeConfig config;
  std::shared_ptr<ConnectionPool> pool;
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::mutex mutex;
  std::unique_ptr<Inbox> inbox;
  std::unique_ptr<OutboxEmitter> outbox;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<Publisher> publisher;
  std::unique_ptr<BacklogCollector> collector;
  std::unique_ptr<Janitor> janitor;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<ConsoleServer> console;
  bool started = false;
  mutable std::mutex probes_mutex;  // guards only the pointer below
  std::shared_ptr<const RuntimeProbes> probes;

  std::shared_ptr<const RuntimeProbes> current_probes() const {
    std::lock_guard lock(probes_mutex);
    return probes;
  }
};

namespace {

// Each handler thread holds one pooled connection for its transaction; a handler that
// calls runtime.inbox().accept() (or anything else on the runtime's pool) borrows a second
// one while it holds the first. With a spare beyond the handler threads, one of them can
// always get its second connection, finish and give both back, so waiting on the pool can
// never close a cycle; the worker's claims, the publisher and the backlog collector hold
// one connection at a time and only share the spare (docs/operations.md, "Sizing the pool").
void check_pool_for_handlers(const RuntimeConfig& c) {
  if (!c.worker.enabled || c.pool.size >= c.worker.concurrency + 1) return;
  throw ConfigError("pool.size", "must be at least worker.concurrency + 1 (" +
                                     std::to_string(c.worker.concurrency + 1) + "), is " + std::to_string(c.pool.size) +
                                     ": each of the worker.concurrency handler threads holds a connection for its "
                                     "transaction, and a handler that calls runtime.inbox().accept() needs one more "
                                     "(raise BOXCAR_POOL_SIZE or lower BOXCAR_WORKER_CONCURRENCY)");
}

}  // namespace

Runtime::Runtime(RuntimeConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  apply_pooler_settings(impl_->config);
  impl_->pool = ConnectionPool::create(impl_->config.pool);
}

Runtime::~Runtime() { stop(); }

namespace {

// The emitter refuses what the publisher's producer would: one limit, message.max.bytes.
std::size_t max_record_bytes(const RuntimeConfig& config) {
  const auto& kafka = config.publisher.kafka;
  const auto set = kafka.find("message.max.bytes");
  if (set == kafka.end()) return kDefaultMaxRecordBytes;
  try {
    std::size_t used = 0;
    const unsigned long long bytes = std::stoull(set->second, &used);
    if (used == set->second.size() && bytes > 0) return bytes;
  } catch (const std::exception&) {
  }
  throw ConfigError("kafka.message.max.bytes", "expects a whole number of bytes, got '" + set->second + "'");
}

// The console's two small pools: reads as the console role (console.database_url), actions
// as the operator role (console.operator_url); each the runtime's pool when not set.
// Neither competes with the handlers for the runtime's connections.
std::unique_ptr<ConsoleServer> start_console(const RuntimeConfig& c) {
  const auto pool_for = [&](const std::string& url) {
    PoolOptions options = c.pool;
    options.url = url.empty() ? c.pool.url : url;
    options.size = 2;
    return ConnectionPool::create(std::move(options));
  };
  return std::make_unique<ConsoleServer>(c.console, console_listen(c.http.listen, c.console.port),
                                         ConsoleSources{.schema = c.schema,
                                                        .consumers = c.consumers,
                                                        .reads = pool_for(c.console.database_url),
                                                        .writes = pool_for(c.console.operator_url)});
}

}  // namespace

const RuntimeConfig& Runtime::config() const noexcept { return impl_->config; }
std::shared_ptr<ConnectionPool> Runtime::pool() const { return impl_->pool; }
std::shared_ptr<Metrics> Runtime::metrics() const { return impl_->metrics; }

Inbox& Runtime::inbox() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->inbox) {
    if (impl_->config.consumers.empty())
      throw ConfigError("consumers", "declare the consumers this module accepts (BOXCAR_CONSUMERS)");
    impl_->inbox = std::make_unique<Inbox>(impl_->pool,
                                           InboxOptions{.schema = impl_->config.schema,
                                                        .consumers = impl_->config.consumers,
                                                        .ordering = impl_->config.inbox_ordering,
                                                        .max_statement_bytes = impl_->config.inbox_max_statement_bytes,
                                                        .group_commit = impl_->config.inbox_group_commit,
                                                        .metrics = impl_->metrics});
  }
  return *impl_->inbox;
}

OutboxEmitter& Runtime::outbox() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->outbox)
    impl_->outbox =
        std::make_unique<OutboxEmitter>(impl_->pool, OutboxOptions{.schema = impl_->config.schema,
                                                                   .max_record_bytes = max_record_bytes(impl_->config),
                                                                   .topics = impl_->config.outbox_topics,
                                                                   .metrics = impl_->metrics});
  return *impl_->outbox;
}

ReadinessReport Runtime::readiness() const {
  const auto probes = impl_->current_probes();
  if (!probes) return {.ready = false, .checks = {}, .detail = "runtime not started"};
  return probes->readiness->report();
}

LivenessReport Runtime::liveness() const {
  const auto probes = impl_->current_probes();
  return probes ? probes->liveness.report() : LivenessReport{};
}

bool Runtime::ready(std::string* detail) const {
  ReadinessReport report = readiness();
  if (detail) *detail = std::move(report.detail);
  return report.ready;
}

void Runtime::start(Role role, std::vector<HandlerRegistration> handlers) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->started) return;
  const RuntimeConfig& c = impl_->config;
  const bool run_worker = role == Role::Worker || role == Role::All;
  const bool run_publisher = role == Role::Publisher || role == Role::All;
  if ((run_worker || role == Role::Ingress) && c.consumers.empty())
    throw ConfigError("consumers", "a worker or ingress declares the consumers it handles (BOXCAR_CONSUMERS)");

  if (run_worker) check_pool_for_handlers(c);
  if (run_worker) {
    // The runtime-wide facts (schema, declared consumers, metrics) complete the options.
    WorkerOptions options = c.worker;
    options.schema = c.schema;
    options.consumers = c.consumers;
    options.metrics = impl_->metrics;
    impl_->worker = std::make_unique<Worker>(impl_->pool, std::move(options), std::move(handlers));
  }
  if (run_publisher) {
    if (!c.publisher.kafka.contains("bootstrap.servers"))
      throw ConfigError("kafka.bootstrap.servers", "a publisher needs it (BOXCAR_KAFKA_BOOTSTRAP_SERVERS)");
    PublisherOptions options = c.publisher;
    options.schema = c.schema;
    options.metrics = impl_->metrics;
    impl_->publisher = std::make_unique<Publisher>(impl_->pool, std::move(options));
  }
  BacklogOptions backlog = c.backlog;
  backlog.schema = c.schema;
  backlog.declared_consumers = c.consumers;
  impl_->collector = std::make_unique<BacklogCollector>(impl_->pool, impl_->metrics, std::move(backlog));
  if (c.janitor.enabled) {
    JanitorOptions janitor = c.janitor;
    // Its advisory lock, SET ROLE and DETACH ... CONCURRENTLY live in a session: never
    // through a transaction pooler (database.session_url).
    janitor.connection_string = impl_->pool->session_connection_string();
    janitor.schema = c.schema;
    janitor.metrics = impl_->metrics;
    impl_->janitor = std::make_unique<Janitor>(std::move(janitor));
  }
  auto probes = std::make_shared<RuntimeProbes>();
  probes->readiness = std::make_shared<ReadinessMonitor>(
      c.probes, [database = std::make_shared<detail::DatabaseProbe>(impl_->pool->connection_string(), c.schema),
                 publisher = impl_->publisher.get()] { return check_readiness(*database, publisher); });
  // Each loop's limit is its longest legitimate iteration plus the stall allowance.
  probes->liveness.watch("readiness check", probes->readiness->heartbeat(),
                         c.probes.readiness_max_age + c.probes.liveness_stall);
  if (impl_->publisher)
    probes->liveness.watch(
        "publisher loop", impl_->publisher->heartbeat(),
        c.publisher.delivery_timeout + std::chrono::seconds(2) + c.publisher.poll_interval + c.probes.liveness_stall);
  probes->readiness->start();
  {
    std::lock_guard probes_lock(impl_->probes_mutex);
    impl_->probes = std::move(probes);
  }
  if (!c.http.listen.empty())
    impl_->http = std::make_unique<HttpServer>(
        c.http, impl_->metrics, [this] { return readiness(); }, [this] { return liveness(); });
  // Disabled, the console costs nothing: no server, thread, pool or query exists.
  if (c.console.enabled) impl_->console = start_console(c);
  impl_->collector->start();
  if (impl_->janitor) impl_->janitor->start();
  if (impl_->worker) impl_->worker->start();
  if (impl_->publisher) impl_->publisher->start();
  impl_->started = true;
  logger("runtime")->info("runtime started: role {}, schema {}, http {}",
                          role == Role::All         ? "all"
                          : role == Role::Worker    ? "worker"
                          : role == Role::Publisher ? "publisher"
                                                    : "ingress",
                          c.schema, impl_->http ? std::to_string(impl_->http->port()) : std::string("off"));
}

void Runtime::stop() {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->started) return;
  if (impl_->worker) impl_->worker->stop();
  if (impl_->publisher) impl_->publisher->stop();
  if (impl_->collector) impl_->collector->stop();
  if (impl_->janitor) impl_->janitor->stop();  // its session closes: another host's janitor takes over
  impl_->console.reset();
  impl_->http.reset();
  std::shared_ptr<const RuntimeProbes> probes;
  {
    std::lock_guard probes_lock(impl_->probes_mutex);
    probes.swap(impl_->probes);
  }
  if (probes) probes->readiness->stop();  // waits for a check in progress (bounded by its timeouts)
  impl_->started = false;
  logger("runtime")->info("runtime stopped");
}

std::uint64_t Runtime::abandoned_handlers() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->worker ? impl_->worker->abandoned_handlers() : 0;
}

int Runtime::http_port() const { return impl_->http ? impl_->http->port() : 0; }

int Runtime::console_port() const { return impl_->console ? impl_->console->port() : 0; }

}  // namespace boxcar

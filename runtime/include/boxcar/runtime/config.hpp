// RuntimeConfig — one configuration for every role a Boxcar process can play, read from
// (lowest to highest precedence) built-in defaults, an optional JSON file, BOXCAR_*
// environment variables and command-line flags, and validated at startup with errors
// that name the offending key.
//
// RuntimeConfig nests the components' own option structs: a component's options are its
// configuration, and their defaults are the defaults. One key table (config_keys())
// names each settable field once (name, type, environment variable, doc, secret?) and
// drives loading, validation errors, `config check` and the reference table in
// docs/runtime.md (a test compares it with reference_table()).
//
// Keys are dotted names. In the environment a key is BOXCAR_ + the key upper-cased with
// '.' as '_' (worker.batch_size -> BOXCAR_WORKER_BATCH_SIZE); librdkafka properties are
// kafka.<property> (BOXCAR_KAFKA_BOOTSTRAP_SERVERS -> kafka.bootstrap.servers). In a
// JSON file nested objects flatten to dotted keys and arrays are lists. On the command
// line: --set key=value, or the shorthands listed in docs/runtime.md.
#pragma once

#include <functional>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/ops/janitor.hpp"
#include "boxcar/runtime/console_server.hpp"
#include "boxcar/runtime/http_server.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/runtime/probes.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/core/connection_pool.hpp"

namespace boxcar {

struct RuntimeConfig {
  /// database.url is pool.url, database.session_url pool.session_url; pool.size defaults
  /// to 10 here (≥ worker.concurrency + 1). pool.prepared_statements follows
  /// database.prepared_statements (apply_pooler_settings).
  PoolOptions pool{.size = 10};
  /// database.pooler: what database.url reaches. "none" (PostgreSQL itself), "session"
  /// (PgBouncer pool_mode = session) or "transaction" (pool_mode = transaction: every
  /// transaction may run on another server connection; needs database.session_url and no
  /// server-side prepared statements). docs/operations.md, "PgBouncer".
  std::string pooler = "none";
  /// database.prepared_statements: "auto" (true unless pooler = transaction), "true" or
  /// "false"; resolved into pool.prepared_statements.
  std::string prepared_statements = "auto";
  /// Schema holding Boxcar's tables; the Runtime hands it to every component (their own
  /// `schema` fields are not configuration keys).
  std::string schema = "boxcar";
  /// The consumers this module declares (what its Inbox accepts); the Runtime hands them
  /// to the worker and the backlog collector.
  std::vector<std::string> consumers{};
  /// inbox.max_statement_bytes: the Runtime inbox's InboxOptions::max_statement_bytes.
  std::size_t inbox_max_statement_bytes = kDefaultMaxStatementBytes;
  /// inbox.group_commit: the Runtime inbox's InboxOptions::group_commit.
  bool inbox_group_commit = InboxOptions{}.group_commit;
  /// inbox.ordering.<consumer>: the Runtime inbox's InboxOptions::ordering, and each
  /// rule's text as configured (for `config check`).
  std::map<std::string, OrderingRule> inbox_ordering{};
  std::map<std::string, std::string> inbox_ordering_text{};
  /// outbox.topics: the Runtime emitter's OutboxOptions::topics (empty: every topic).
  std::set<std::string> outbox_topics{};
  /// The worker's options; schema, consumers and metrics are filled in by the Runtime.
  WorkerOptions worker{};
  /// The publisher's options (kafka.*, publisher.topics.*); schema and metrics are filled
  /// in by the Runtime.
  PublisherOptions publisher{};
  /// http.listen: /metrics, /healthz, /readyz; empty disables the HTTP server.
  HttpOptions http{};
  /// console.*: the operator console (docs/console.md); off unless console.enabled.
  ConsoleOptions console{};
  /// probes.*: how /readyz's cached verdict is refreshed and aged, and when /healthz
  /// calls a loop stalled.
  ProbeOptions probes{};
  /// metrics.backlog_interval_ms; schema and declared consumers are filled in by the Runtime.
  BacklogOptions backlog{};
  /// retention.*: the janitor (enabled, interval) and what it keeps; connection string,
  /// schema and metrics are filled in by the Runtime.
  JanitorOptions janitor{};
  /// "text" or "json".
  std::string log_format = "text";
  /// trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
};

/// One configuration key: the single place its name, type, documentation, environment
/// variable and field are written.
struct ConfigKey {
  /// "worker.lease_ms"; a family of keys ends in ".<...>" ("kafka.<property>").
  std::string name{};
  /// What a value looks like: "count ≥ 1", "milliseconds ≥ 1", "true|false", "text|json", ...
  std::string type{};
  std::string doc{};
  /// The environment variable ("" when the key has none).
  std::string env{};
  /// `config check` shows the value redacted.
  bool secret = false;
  /// load_config fails without it.
  bool required = false;
  /// For a family of keys, the prefix every member has ("kafka."); empty for a plain key.
  std::string family{};
  /// Sets the field from its textual value. @throws ConfigError(name) for a bad value.
  std::function<void(RuntimeConfig&, const std::string& key, const std::string& value)> set{};
  /// The effective values (one per key; several for a family), secrets redacted.
  std::function<std::vector<std::pair<std::string, std::string>>(const RuntimeConfig&)> show{};

  /// The value of a default RuntimeConfig, as `config check` would print it.
  std::string default_value() const;
};

/// Every configuration key, in the order of the reference table.
const std::vector<ConfigKey>& config_keys();

/// The key `name` belongs to (exact name, else the family whose prefix it has); null if none.
const ConfigKey* find_config_key(const std::string& name);

/// The Markdown reference table of every key (the section of docs/runtime.md between
/// <!-- config-reference:begin --> and <!-- config-reference:end -->).
std::string reference_table();

/// Where a RuntimeConfig comes from. The defaults are the real process inputs.
struct ConfigSources {
  /// Path of a JSON file; empty: none (BOXCAR_CONFIG or --config name one too).
  std::string file{};
  /// NAME=VALUE strings; default: the process environment.
  std::optional<std::vector<std::string>> environment{};
  /// key=value overrides from the command line (highest precedence).
  std::vector<std::pair<std::string, std::string>> flags{};
};

/// Reads and validates the configuration.
/// @throws ConfigError naming the key (e.g. "worker.concurrency", "http.listen",
///   "config.file") for an unknown key in a file or flag, a malformed value, a missing
///   required one (database.url), or console.admin_token anywhere but the environment.
RuntimeConfig load_config(const ConfigSources& sources = {});

/// Applies the JSON text of a configuration file to `config`, as load_config does with
/// the file it reads: nested objects flatten to dotted keys, arrays to lists. `file`
/// names the file in errors. No environment, flags or required-key check.
/// @throws ConfigError("config.file") when the text is not JSON or not an object;
///   ConfigError naming the key for an unknown key or a malformed value.
void apply_config_file(RuntimeConfig& config, std::string_view json_text, const std::string& file);

/// Checks database.pooler against the settings it needs and resolves
/// database.prepared_statements into config.pool.prepared_statements. load_config() and
/// the Runtime's constructor call it; idempotent.
/// @throws ConfigError("database.session_url") when pooler = transaction has no
///   session_url, or one equal to database.url (LISTEN and the migration lock need a
///   session: point it at PostgreSQL directly); ConfigError("database.prepared_statements")
///   for "true" with pooler = transaction (PgBouncer 1.18 loses server-side prepared
///   statements between transactions).
void apply_pooler_settings(RuntimeConfig& config);

/// Every effective key and value, secrets (passwords in the database URL, kafka.*
/// passwords, secrets and keys) replaced by "***": what `config check` prints.
std::vector<std::pair<std::string, std::string>> describe(const RuntimeConfig& config);

/// `url` with any password replaced by ***: redact_connection_string() from
/// boxcar/core/redaction.hpp, kept here for existing callers.
std::string redact_url(const std::string& url);

}  // namespace boxcar

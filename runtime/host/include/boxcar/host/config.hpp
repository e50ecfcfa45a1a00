// RuntimeConfig — one configuration for every role a Boxcar process can play, read from
// (lowest to highest precedence) built-in defaults, an optional JSON file, BOXCAR_*
// environment variables and command-line flags, and validated at startup with errors
// that name the offending key.
//
// Keys are dotted names. In the environment a key is BOXCAR_ + the key upper-cased with
// '.' as '_' (worker.batch_size -> BOXCAR_WORKER_BATCH_SIZE); librdkafka properties are
// kafka.<property> (BOXCAR_KAFKA_BOOTSTRAP_SERVERS -> kafka.bootstrap.servers). In a
// JSON file nested objects flatten to dotted keys and arrays are lists. On the command
// line: --set key=value, or the shorthands listed in docs/runtime.md.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace boxcar {

struct RuntimeConfig {
  std::string database_url{};
  std::string schema = "boxcar";
  std::size_t pool_size = 10;
  /// The consumers this module declares (what its Inbox accepts).
  std::vector<std::string> consumers{};

  bool worker_enabled = true;
  /// worker.consumers: owned consumers; empty = every declared consumer (each needs a
  /// handler, or startup fails).
  std::vector<std::string> worker_consumers{};
  std::size_t worker_concurrency = 4;
  std::size_t worker_batch_size = 1;
  std::chrono::milliseconds worker_lease{60000};
  std::chrono::milliseconds worker_handler_timeout{30000};
  int worker_max_attempts = 10;
  std::chrono::milliseconds worker_poll_interval{1000};

  std::size_t publisher_batch_size = 1000;
  int publisher_max_attempts = 0;
  std::chrono::milliseconds publisher_delivery_timeout{30000};
  std::chrono::milliseconds publisher_lease{90000};
  std::chrono::milliseconds publisher_poll_interval{1000};
  /// event type -> topic.
  std::map<std::string, std::string> publisher_topics{};
  /// librdkafka properties, passed through.
  std::map<std::string, std::string> kafka{};

  /// host:port for /metrics, /healthz, /readyz; empty disables the HTTP server.
  std::string http_listen = "127.0.0.1:9464";
  std::chrono::milliseconds backlog_interval{15000};
  std::chrono::milliseconds shutdown_grace{10000};
  /// "text" or "json".
  std::string log_format = "text";
  /// trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
};

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
///   "config.file") for an unknown key in a file or flag, a malformed value, or a
///   missing required one (database.url).
RuntimeConfig load_config(const ConfigSources& sources = {});

/// Every effective key and value, secrets (passwords in the database URL, kafka.*
/// passwords, secrets and keys) replaced by "***": what `config check` prints.
std::vector<std::pair<std::string, std::string>> describe(const RuntimeConfig& config);

/// `url` with any password replaced by ***.
std::string redact_url(const std::string& url);

}  // namespace boxcar

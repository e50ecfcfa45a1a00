// The configuration key table: every settable field of RuntimeConfig, written once.
// Loading (config.cpp), `config check`, validation errors and the reference table in
// docs/runtime.md all come from here. To add a key: add the field to the component's
// options struct, add one row below, and regenerate the docs table with
// scripts/config-reference (tests/host/config_keys_test.cpp fails until you do).
#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>

#include "boxcar/runtime/config.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace boxcar {
namespace {

using Shown = std::vector<std::pair<std::string, std::string>>;

std::string env_name(const std::string& key) {
  std::string name = "BOXCAR_";
  for (char c : key) name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// Comma-separated items, trimmed; an empty item between commas is a mistake, not nothing.
std::vector<std::string> split_list(const std::string& key, const std::string& value) {
  std::vector<std::string> items;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    if (first == std::string::npos)
      throw ConfigError(key, "expects a comma-separated list without empty items, got '" + value + "'");
    items.push_back(item.substr(first, last - first + 1));
  }
  return items;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

long long parse_number(const std::string& key, const std::string& value, long long min) {
  try {
    std::size_t used = 0;
    const long long n = std::stoll(value, &used);
    if (used == value.size() && n >= min) return n;
  } catch (const std::exception&) {
  }
  throw ConfigError(key, "expects a whole number of at least " + std::to_string(min) + ", got '" + value + "'");
}

// The builders below take the field as a generic lambda, `[](auto& c) -> auto& { ... }`,
// so one accessor serves both setting (RuntimeConfig&) and showing (const RuntimeConfig&).

template <class Field>
ConfigKey number(std::string name, Field field, std::string doc, long long min = 1) {
  ConfigKey key{.name = name, .type = "count ≥ " + std::to_string(min), .doc = std::move(doc), .env = env_name(name)};
  key.set = [field, min](RuntimeConfig& c, const std::string& k, const std::string& v) {
    auto& target = field(c);
    target = static_cast<std::remove_reference_t<decltype(target)>>(parse_number(k, v, min));
  };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, std::to_string(field(c))}}; };
  return key;
}

template <class Field>
ConfigKey millis(std::string name, Field field, std::string doc, long long min = 1) {
  ConfigKey key{
      .name = name, .type = "milliseconds ≥ " + std::to_string(min), .doc = std::move(doc), .env = env_name(name)};
  key.set = [field, min](RuntimeConfig& c, const std::string& k, const std::string& v) {
    field(c) = std::chrono::milliseconds(parse_number(k, v, min));
  };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, std::to_string(field(c).count())}}; };
  return key;
}

template <class Field>
ConfigKey hours(std::string name, Field field, std::string doc) {
  ConfigKey key{.name = name, .type = "hours ≥ 0", .doc = std::move(doc), .env = env_name(name)};
  key.set = [field](RuntimeConfig& c, const std::string& k, const std::string& v) {
    field(c) = std::chrono::hours(parse_number(k, v, 0));
  };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, std::to_string(field(c).count())}}; };
  return key;
}

template <class Field>
ConfigKey boolean(std::string name, Field field, std::string doc) {
  ConfigKey key{.name = name, .type = "true|false", .doc = std::move(doc), .env = env_name(name)};
  key.set = [field](RuntimeConfig& c, const std::string& k, const std::string& v) {
    if (v == "true" || v == "1" || v == "yes")
      field(c) = true;
    else if (v == "false" || v == "0" || v == "no")
      field(c) = false;
    else
      throw ConfigError(k, "expects true or false, got '" + v + "'");
  };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, field(c) ? "true" : "false"}}; };
  return key;
}

using Check = std::function<void(const std::string& key, const std::string& value)>;

template <class Field>
ConfigKey text(std::string name, std::string type, Field field, std::string doc, Check check) {
  ConfigKey key{.name = name, .type = std::move(type), .doc = std::move(doc), .env = env_name(name)};
  key.set = [field, check](RuntimeConfig& c, const std::string& k, const std::string& v) {
    check(k, v);
    field(c) = v;
  };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, field(c)}}; };
  return key;
}

template <class Field>
ConfigKey choice(std::string name, Field field, std::string doc, std::vector<std::string> options) {
  std::string type;
  for (const auto& option : options) type += (type.empty() ? "" : "|") + option;
  return text(name, type, field, std::move(doc), [options, type](const std::string& k, const std::string& v) {
    if (std::find(options.begin(), options.end(), v) == options.end())
      throw ConfigError(k, "expects one of " + type + ", got '" + v + "'");
  });
}

template <class Field>
ConfigKey list(std::string name, Field field, std::string doc) {
  ConfigKey key{.name = name, .type = "list A,B", .doc = std::move(doc), .env = env_name(name)};
  key.set = [field](RuntimeConfig& c, const std::string& k, const std::string& v) { field(c) = split_list(k, v); };
  key.show = [field, name](const RuntimeConfig& c) { return Shown{{name, join(field(c))}}; };
  return key;
}

ConfigKey batch_failure_mode() {
  const std::string name = "worker.batch_failure_mode";
  ConfigKey key{.name = name,
                .type = "rerun|savepoint",
                .doc =
                    "what a failed batch does when batch_size > 1: rerun it one message per transaction, or "
                    "roll back to a savepoint per message (docs/worker.md)",
                .env = env_name(name)};
  key.set = [](RuntimeConfig& c, const std::string& k, const std::string& v) {
    if (v == "rerun")
      c.worker.batch_failure_mode = BatchFailureMode::Rerun;
    else if (v == "savepoint")
      c.worker.batch_failure_mode = BatchFailureMode::Savepoint;
    else
      throw ConfigError(k, "expects one of rerun|savepoint, got '" + v + "'");
  };
  key.show = [name](const RuntimeConfig& c) {
    return Shown{{name, c.worker.batch_failure_mode == BatchFailureMode::Rerun ? "rerun" : "savepoint"}};
  };
  return key;
}

bool is_secret_property(const std::string& key) {
  std::string lower = key;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("password") != std::string::npos || lower.find("secret") != std::string::npos ||
         (lower.find("key") != std::string::npos && lower.starts_with("kafka.ssl")) ||
         lower.find("sasl.oauthbearer.config") != std::string::npos;
}

ConfigKey kafka_properties() {
  ConfigKey key{.name = "kafka.<property>",
                .type = "librdkafka property",
                .doc =
                    "any librdkafka property, passed through (`bootstrap.servers` is required by a publisher; "
                    "`enable.idempotence` and `acks` are fixed); in the environment `_` stands for `.`; "
                    "`config check` redacts passwords, secrets and SSL keys",
                .env = "BOXCAR_KAFKA_<PROPERTY>",
                .secret = true,
                .family = "kafka."};
  key.set = [](RuntimeConfig& c, const std::string& k, const std::string& v) { c.publisher.kafka[k.substr(6)] = v; };
  key.show = [](const RuntimeConfig& c) {
    Shown out;
    for (const auto& [name, value] : c.publisher.kafka)
      out.emplace_back("kafka." + name, is_secret_property("kafka." + name) ? "***" : value);
    return out;
  };
  return key;
}

ConfigKey topics() {
  const std::string name = "publisher.topics";
  ConfigKey key{
      .name = name,
      .type = "TYPE=TOPIC,...",
      .doc = "topic overrides per event type; also one per key as `publisher.topics.<type>` (`--topic TYPE=TOPIC`)",
      .env = env_name(name),
      .family = "publisher.topics."};
  key.set = [name](RuntimeConfig& c, const std::string& k, const std::string& v) {
    auto& overrides = c.publisher.topic_overrides;
    if (k != name) {  // publisher.topics.<type>
      if (v.empty()) throw ConfigError(k, "expects a topic name");
      overrides[k.substr(name.size() + 1)] = v;
      return;
    }
    for (const auto& pair : split_list(k, v)) {
      const auto eq = pair.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
        throw ConfigError(k, "expects EVENT_TYPE=TOPIC[,...], got '" + pair + "'");
      overrides[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
  };
  key.show = [name](const RuntimeConfig& c) {
    Shown out;
    for (const auto& [type, topic] : c.publisher.topic_overrides) out.emplace_back(name + "." + type, topic);
    return out;
  };
  return key;
}

// inbox.ordering.<consumer> = "payload:/order/id" | "header:NAME", then optionally
// " park_after=N" (default: block). Parsed here so a mistake fails at load time.
OrderingRule parse_ordering_rule(const std::string& key, const std::string& value) {
  const auto space = value.find(' ');
  const std::string source = value.substr(0, space);
  const std::string policy = space == std::string::npos ? "block" : value.substr(space + 1);
  const auto usage = [&] {
    return ConfigError(key,
                       "expects 'payload:/POINTER' or 'header:NAME', optionally followed by ' block' or "
                       "' park_after=N', got '" +
                           value + "'");
  };
  std::optional<OrderingKey> ordering_key;
  try {
    if (source.starts_with("payload:"))
      ordering_key = OrderingKey::payload_pointer(source.substr(8));
    else if (source.starts_with("header:"))
      ordering_key = OrderingKey::metadata_header(source.substr(7));
    else
      throw usage();
  } catch (const ConfigError& e) {
    if (e.key() == key) throw;
    throw ConfigError(key, e.what());
  }
  if (policy == "block") return {.key = *ordering_key, .head_of_line = HeadOfLine::block()};
  if (!policy.starts_with("park_after=")) throw usage();
  return {.key = *ordering_key,
          .head_of_line = HeadOfLine::park_after(static_cast<int>(parse_number(key, policy.substr(11), 1)))};
}

ConfigKey ordering() {
  const std::string name = "inbox.ordering";
  ConfigKey key{.name = name,
                .type = "SOURCE [POLICY]",
                .doc =
                    "per-key ordering of a consumer's receipts, one key per consumer as "
                    "`inbox.ordering.<consumer>`: `payload:/POINTER` or `header:NAME`, then `block` (default) or "
                    "`park_after=N` (docs/ordering.md)",
                // BOXCAR_INBOX_ORDERING_ORDERS_V1 -> inbox.ordering.orders.v1 ('_' reads as '.').
                .env = "BOXCAR_INBOX_ORDERING_<CONSUMER>",
                .family = "inbox.ordering."};
  key.set = [name](RuntimeConfig& c, const std::string& k, const std::string& v) {
    if (k == name) {
      if (v.empty()) return;  // the family's own name: nothing ordered
      throw ConfigError(k, "name the consumer: inbox.ordering.<consumer>=" + v);
    }
    c.inbox_ordering.insert_or_assign(k.substr(name.size() + 1), parse_ordering_rule(k, v));
    c.inbox_ordering_text[k.substr(name.size() + 1)] = v;
  };
  key.show = [name](const RuntimeConfig& c) {
    Shown out;
    for (const auto& [consumer, text] : c.inbox_ordering_text) out.emplace_back(name + "." + consumer, text);
    return out;
  };
  return key;
}

ConfigKey outbox_topics() {
  const std::string name = "outbox.topics";
  ConfigKey key{.name = name,
                .type = "list A,B",
                .doc =
                    "the topics this module emits to: an emit to another fails its transaction with "
                    "OUTBOX_TOPIC_UNKNOWN, before anything is written; empty: every topic (docs/publisher.md, "
                    "\"Emitting\")",
                .env = env_name(name)};
  key.set = [](RuntimeConfig& c, const std::string& k, const std::string& v) {
    const auto topics = split_list(k, v);
    c.outbox_topics = {topics.begin(), topics.end()};
  };
  key.show = [name](const RuntimeConfig& c) {
    return Shown{{name, join({c.outbox_topics.begin(), c.outbox_topics.end()})}};
  };
  return key;
}

ConfigKey allowed_topics() {
  const std::string name = "publisher.allowed_topics";
  ConfigKey key{.name = name,
                .type = "list A,B",
                .doc =
                    "the only topics the publisher produces to (after `publisher.topics`); an event for another "
                    "topic becomes DEAD (TOPIC_NOT_ALLOWED), never produced; empty: every topic "
                    "(docs/security.md)",
                .env = env_name(name)};
  key.set = [](RuntimeConfig& c, const std::string& k, const std::string& v) {
    const auto topics = split_list(k, v);
    c.publisher.allowed_topics = {topics.begin(), topics.end()};
  };
  key.show = [name](const RuntimeConfig& c) {
    return Shown{{name, join({c.publisher.allowed_topics.begin(), c.publisher.allowed_topics.end()})}};
  };
  return key;
}

void check_listen(const std::string& key, const std::string& value) {
  if (value.empty()) return;  // disables the HTTP server
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon + 1 == value.size() ||
      value.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    throw ConfigError(key, "expects HOST:PORT (port 0 picks a free one), got '" + value + "'");
}

void check_parameters(const std::string& key, const std::string& value) {
  std::istringstream words(value);
  std::string pair;
  while (words >> pair)
    if (pair.find('=') == std::string::npos || pair.front() == '=')
      throw ConfigError(key, "expects space-separated libpq NAME=VALUE parameters, got '" + pair + "'");
}

void check_url(const std::string& key, const std::string& value) {
  if (value.empty()) throw ConfigError(key, "must not be empty");
}

// A URL (postgresql://...) or a key=value string; "db:5432" or a bare host name is a typo
// that would otherwise surface only when the first LISTEN connects.
void check_optional_url(const std::string& key, const std::string& value) {
  if (value.empty() || value.starts_with("postgresql://") || value.starts_with("postgres://") ||
      value.find('=') != std::string::npos)
    return;
  throw ConfigError(key, "expects a postgresql:// URL or libpq key=value parameters (or nothing), got another form");
}

std::vector<ConfigKey> build_table() {
  std::vector<ConfigKey> keys = {
      text(
          "database.url", "libpq URL", [](auto& c) -> auto& { return c.pool.url; },
          "PostgreSQL URL or key=value string (also `--database-url`)", check_url),
      text(
          "database.session_url", "libpq URL or empty", [](auto& c) -> auto& { return c.pool.session_url; },
          "where the connections that need a session go: the wake-up LISTEN and `boxcar migrate` (session advisory "
          "lock); empty: database.url. Required with database.pooler = transaction, pointing at PostgreSQL directly "
          "(docs/operations.md, \"PgBouncer\")",
          check_optional_url),
      choice("database.pooler", [](auto& c) -> auto& { return c.pooler; },
             "what database.url reaches: PostgreSQL itself, or PgBouncer with pool_mode = session or transaction "
             "(docs/operations.md, \"PgBouncer\")",
             {"none", "session", "transaction"}),
      choice("database.prepared_statements", [](auto& c) -> auto& { return c.prepared_statements; },
             "run named statements as server-side prepared statements (true) or unnamed parameterised ones "
             "(false); auto: false with database.pooler = transaction, else true",
             {"auto", "true", "false"}),
      text(
          "schema", "identifier", [](auto& c) -> auto& { return c.schema; }, "schema holding Boxcar's tables",
          [](const std::string& k, const std::string& v) { validate_schema_name(v, k); }),
      number(
          "pool.size", [](auto& c) -> auto& { return c.pool.size; }, "connections (≥ worker.concurrency + 1)"),
      millis(
          "pool.acquire_timeout_ms", [](auto& c) -> auto& { return c.pool.acquire_timeout; },
          "how long a component waits for a free connection before DATABASE_POOL_TIMEOUT"),
      number(
          "pool.prepared_check_interval", [](auto& c) -> auto& { return c.pool.prepared_check_interval; },
          "a connection's server-side prepared statements are listed and checked on every N-th worker handler "
          "transaction; the others reset on their COMMIT (docs/operations.md, \"Session reset\")"),
      text(
          "pool.default_parameters", "libpq NAME=VALUE ...", [](auto& c) -> auto& { return c.pool.default_parameters; },
          "libpq parameters added to database.url unless it sets them (timeouts, keepalives; docs/operations.md)",
          check_parameters),
      list(
          "consumers", [](auto& c) -> auto& { return c.consumers; }, "declared consumers (what the inbox accepts)"),
      number(
          "inbox.max_statement_bytes", [](auto& c) -> auto& { return c.inbox_max_statement_bytes; },
          "byte budget of one accept_many statement (a larger batch takes several, in one transaction); an item "
          "larger alone is INBOX_ITEM_TOO_LARGE. At most 33554432 (docs/schema.md)"),
      boolean(
          "inbox.group_commit", [](auto& c) -> auto& { return c.inbox_group_commit; },
          "true: accept() calls that arrive while another flush commits share the next transaction (one WAL flush); "
          "false: each commits alone (README, \"Accepting a message\")"),
      ordering(),
      boolean(
          "worker.enabled", [](auto& c) -> auto& { return c.worker.enabled; },
          "false: a worker or all process never claims; the ingress role builds no worker whatever this says "
          "(docs/runtime.md, \"Ingress-only and worker deployments\")"),
      list(
          "worker.consumers", [](auto& c) -> auto& { return c.worker.owned_consumers; },
          "owned consumers; empty: every declared consumer. Each needs a handler or startup fails (list the "
          "others to run without one)"),
      number(
          "worker.concurrency", [](auto& c) -> auto& { return c.worker.concurrency; }, "handler threads"),
      number(
          "worker.batch_size", [](auto& c) -> auto& { return c.worker.batch_size; }, "messages per transaction"),
      batch_failure_mode(),
      number(
          "worker.claim_limit", [](auto& c) -> auto& { return c.worker.claim_limit; },
          "most receipts one claim statement takes"),
      boolean(
          "worker.fair_claims", [](auto& c) -> auto& { return c.worker.fair_claims; },
          "true (the default): each claim is shared out over the consumer's scopes (tenants) in round robin, so one "
          "tenant's backlog cannot starve the others; false: oldest due first (docs/worker.md, \"Fair claims across "
          "tenants\")"),
      millis(
          "worker.lease_ms", [](auto& c) -> auto& { return c.worker.lease; },
          "claim lease; must exceed worker.handler_timeout_ms by at least 1 s"),
      millis(
          "worker.handler_timeout_ms", [](auto& c) -> auto& { return c.worker.handler_timeout; },
          "handler deadline (one batch when batch_size > 1)"),
      number(
          "worker.max_attempts", [](auto& c) -> auto& { return c.worker.max_attempts; }, "attempts before DEAD"),
      number(
          "worker.max_outage_hand_backs", [](auto& c) -> auto& { return c.worker.max_outage_hand_backs; },
          "uncharged hand-backs a receipt gets, in its life, when a probe confirms a database outage under its handler "
          "(full disk, lost server); then such failures are charged. At the defaults 32 span over an hour "
          "(docs/worker.md, \"Infrastructure failures are not attempts\")",
          0),
      millis(
          "worker.backoff_base_ms", [](auto& c) -> auto& { return c.worker.backoff.base; },
          "retry delay ceiling of the first retry, doubling per attempt (full jitter)", 0),
      millis(
          "worker.backoff_cap_ms", [](auto& c) -> auto& { return c.worker.backoff.cap; },
          "largest retry delay ceiling (≥ worker.backoff_base_ms)", 0),
      millis(
          "worker.poll_interval_ms", [](auto& c) -> auto& { return c.worker.poll_interval; },
          "polling fallback and lease-recovery cadence"),
      number(
          "worker.max_error_bytes", [](auto& c) -> auto& { return c.worker.max_error_bytes; },
          "longest error text stored on a receipt; longer ones are cut visibly"),
      text(
          "worker.tenant_setting", "custom setting name", [](auto& c) -> auto& { return c.worker.tenant_setting; },
          "setting (e.g. `app.tenant_id`) set to the message's tenant (`''` when global) with SET LOCAL in "
          "context.tx before each handler, for row-level-security policies (docs/security.md); empty: none",
          [](const std::string& k, const std::string& v) {
            if (!v.empty() && !is_custom_setting_name(v))
              throw ConfigError(k, "expects a custom setting name such as app.tenant_id, got '" + v + "'");
          }),
      millis(
          "shutdown.grace_ms", [](auto& c) -> auto& { return c.worker.shutdown_grace; },
          "in-flight handlers' grace on stop; then their queries are cancelled and, 2 s later, threads still "
          "running are abandoned"),
      outbox_topics(),
      number(
          "publisher.batch_size", [](auto& c) -> auto& { return c.publisher.batch_size; }, "events per batch"),
      number(
          "publisher.max_in_flight_batches", [](auto& c) -> auto& { return c.publisher.max_in_flight_batches; },
          "batches with the producer at once (pipelining; docs/benchmarks.md)"),
      number(
          "publisher.max_in_flight_bytes", [](auto& c) -> auto& { return c.publisher.max_in_flight_bytes; },
          "most record bytes claimed and with the producer at once, over all batches in flight (bounds the "
          "publisher's memory; docs/publisher.md)"),
      number(
          "publisher.max_attempts", [](auto& c) -> auto& { return c.publisher.max_attempts; },
          "failed deliveries before DEAD; 0: retry forever", 0),
      millis(
          "publisher.max_age_ms", [](auto& c) -> auto& { return c.publisher.max_age; },
          "an event still undelivered this long after its emit becomes DEAD (MAX_AGE_EXCEEDED) at its next failed "
          "delivery; 0: retry forever",
          0),
      millis(
          "publisher.delivery_timeout_ms", [](auto& c) -> auto& { return c.publisher.delivery_timeout; },
          "librdkafka message.timeout.ms (≥ 1000)"),
      millis(
          "publisher.lease_ms", [](auto& c) -> auto& { return c.publisher.lease; },
          "batch claim lease; must exceed publisher.delivery_timeout_ms by at least 5 s"),
      millis(
          "publisher.backoff_base_ms", [](auto& c) -> auto& { return c.publisher.backoff.base; },
          "retry delay ceiling of the first failed delivery, doubling per attempt (full jitter)", 0),
      millis(
          "publisher.backoff_cap_ms", [](auto& c) -> auto& { return c.publisher.backoff.cap; },
          "largest retry delay ceiling (≥ publisher.backoff_base_ms)", 0),
      millis(
          "publisher.poll_interval_ms", [](auto& c) -> auto& { return c.publisher.poll_interval; },
          "polling fallback and lease-recovery cadence"),
      topics(),
      allowed_topics(),
      kafka_properties(),
      text(
          "http.listen", "HOST:PORT", [](auto& c) -> auto& { return c.http.listen; },
          "/metrics, /healthz, /readyz; port 0 picks one; empty disables", check_listen),
      boolean(
          "console.enabled", [](auto& c) -> auto& { return c.console.enabled; },
          "serve the operator console (a web page and its JSON API under /api/v1/) in this process; off: no "
          "thread, no route, no query (docs/console.md)"),
      number(
          "console.port", [](auto& c) -> auto& { return c.console.port; },
          "the console's port, on the host(s) of http.listen (127.0.0.1 when it is empty); 0 picks one", 0),
      text(
          "console.admin_token", "secret", [](auto& c) -> auto& { return c.console.admin_token; },
          "the secret that allows the console's actions, compared in constant time; only from the environment "
          "(never a file or flag); empty: read-only (docs/console.md)",
          [](const std::string&, const std::string&) {}),
      text(
          "console.admin_token_file", "absolute path or empty",
          [](auto& c) -> auto& { return c.console.admin_token_file; },
          "a file holding the admin token (instead of BOXCAR_CONSOLE_ADMIN_TOKEN), read when the console starts",
          [](const std::string& k, const std::string& v) {
            if (!v.empty() && v.front() != '/') throw ConfigError(k, "expects an absolute path, got '" + v + "'");
          }),
      text(
          "console.database_url", "libpq URL or empty", [](auto& c) -> auto& { return c.console.database_url; },
          "the connection of the console's reads, as a user holding the console role (docs/security.md); empty: "
          "database.url",
          check_optional_url),
      text(
          "console.operator_url", "libpq URL or empty", [](auto& c) -> auto& { return c.console.operator_url; },
          "the connection of the console's actions and of an admin's payload reads, as a user holding the operator "
          "role; empty: database.url",
          check_optional_url),
      millis(
          "console.refresh_ms", [](auto& c) -> auto& { return c.console.refresh; },
          "how often the console page refreshes its panels"),
      millis(
          "probes.readiness_interval_ms", [](auto& c) -> auto& { return c.probes.readiness_interval; },
          "pause between background readiness checks; /readyz serves the last verdict and its age"),
      millis(
          "probes.readiness_max_age_ms", [](auto& c) -> auto& { return c.probes.readiness_max_age; },
          "a readiness verdict older than this (a stuck check) is not ready; must exceed "
          "probes.readiness_interval_ms plus the slowest check"),
      millis(
          "probes.liveness_stall_ms", [](auto& c) -> auto& { return c.probes.liveness_stall; },
          "/healthz fails when a loop (readiness check, publisher) has not beaten for this long beyond its own "
          "longest legitimate iteration"),
      millis(
          "metrics.backlog_interval_ms", [](auto& c) -> auto& { return c.backlog.interval; },
          "backlog collection cadence; the fleet's stored figures are recomputed once they are this old"),
      number(
          "metrics.backlog_exact_cap", [](auto& c) -> auto& { return c.backlog.exact_cap; },
          "inbox backlog counts are exact up to this many receipts per consumer and status group, estimated "
          "above (boxcar_inbox_receipts_estimated)"),
      boolean(
          "retention.janitor", [](auto& c) -> auto& { return c.janitor.enabled; },
          "run the janitor in this process: one per schema leads (advisory lock); it creates outbox partitions "
          "ahead, retires finished old ones and purges old COMPLETED receipts (docs/operations.md, \"Janitor\"); "
          "needs the tables' owner role"),
      millis(
          "retention.interval_ms", [](auto& c) -> auto& { return c.janitor.interval; },
          "time between two janitor runs (and two tries for its lock)"),
      hours(
          "retention.inbox_hours", [](auto& c) -> auto& { return c.janitor.retention.inbox_retention; },
          "COMPLETED receipts are kept this long, so a redelivery stays a duplicate; at least "
          "retention.redelivery_horizon_hours"),
      hours(
          "retention.outbox_hours", [](auto& c) -> auto& { return c.janitor.retention.outbox_retention; },
          "an outbox partition is retired once every event in it is finished and older than this"),
      hours(
          "retention.redelivery_horizon_hours", [](auto& c) -> auto& { return c.janitor.retention.redelivery_horizon; },
          "the longest time after which a source may still redeliver; retention.inbox_hours may not be shorter "
          "(0: not told)"),
      hours(
          "retention.dead_hours", [](auto& c) -> auto& { return c.janitor.retention.dead_retention; },
          "DEAD receipts (discarded or not) are deleted once unchanged this long, except a DEAD head that blocks its "
          "ordering key; at least retention.redelivery_horizon_hours. 0: kept until retried (docs/operations.md, "
          "\"Janitor\")"),
      number(
          "retention.batch_size", [](auto& c) -> auto& { return c.janitor.retention.batch_size; },
          "COMPLETED (and DEAD) receipts per DELETE statement"),
      number(
          "retention.partitions_ahead", [](auto& c) -> auto& { return c.janitor.retention.partitions_ahead; },
          "whole UTC days after today that outbox partitions cover after each janitor run"),
      choice("log.format", [](auto& c) -> auto& { return c.log_format; }, "`json`: one JSON object per line",
             {"text", "json"}),
      choice("log.level", [](auto& c) -> auto& { return c.log_level; }, "spdlog level",
             {"trace", "debug", "info", "warn", "error", "critical", "off"}),
  };
  // database.url: required, and only its password is secret.
  keys.front().required = true;
  keys.front().secret = true;
  keys.front().show = [](const RuntimeConfig& c) { return Shown{{"database.url", redact_url(c.pool.url)}}; };
  keys[1].secret = true;
  keys[1].show = [](const RuntimeConfig& c) {
    return Shown{{"database.session_url", c.pool.session_url.empty() ? "" : redact_url(c.pool.session_url)}};
  };
  for (auto& key : keys) {
    if (key.name == "console.admin_token") {
      key.secret = true;
      key.show = [](const RuntimeConfig& c) {
        return Shown{{"console.admin_token", c.console.admin_token.empty() ? "" : "***"}};
      };
    } else if (key.name == "console.database_url" || key.name == "console.operator_url") {
      key.secret = true;
      const bool reads = key.name == "console.database_url";
      key.show = [reads](const RuntimeConfig& c) {
        const std::string& url = reads ? c.console.database_url : c.console.operator_url;
        return Shown{{reads ? "console.database_url" : "console.operator_url", url.empty() ? "" : redact_url(url)}};
      };
    }
  }
  return keys;
}

std::string escape_cell(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string ConfigKey::default_value() const {
  if (required) return "(required)";
  const auto shown = show(RuntimeConfig{});
  return shown.size() == 1 ? shown.front().second : "";
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = build_table();
  return keys;
}

const ConfigKey* find_config_key(const std::string& name) {
  for (const auto& key : config_keys())
    if (key.name == name) return &key;
  for (const auto& key : config_keys())
    if (!key.family.empty() && name.starts_with(key.family) && name.size() > key.family.size()) return &key;
  return nullptr;
}

std::string reference_table() {
  std::string out =
      "| key | type | environment | default | meaning |\n"
      "| --- | --- | --- | --- | --- |\n";
  const auto code = [](const std::string& text) { return text.empty() ? std::string() : "`" + text + "`"; };
  for (const auto& key : config_keys()) {
    std::string doc = key.doc;
    if (key.secret && key.family.empty())
      doc += key.type.find("URL") != std::string::npos ? " (its password is redacted in `config check`)"
                                                       : " (redacted in `config check`)";
    out += "| " + code(key.name) + " | " + escape_cell(key.type) + " | " + code(key.env) + " | " +
           (key.required ? key.default_value() : code(escape_cell(key.default_value()))) + " | " + escape_cell(doc) +
           " |\n";
  }
  return out;
}

}  // namespace boxcar

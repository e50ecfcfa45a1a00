// The key table is the one source of configuration: every key loads, rejects a bad value
// under its own name, every component option is reachable, library errors name keys of
// the table, and docs/runtime.md shows the table it renders.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "boxcar/runtime/config.hpp"
#include "boxcar/core/error.hpp"

using namespace boxcar;

namespace {

const std::vector<std::string> kBaseEnv = {"BOXCAR_DATABASE_URL=postgresql://u@h/db"};

std::string error_key(const std::string& key, const std::string& value) {
  try {
    load_config({.environment = kBaseEnv, .flags = {{key, value}}});
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "(no error)";
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kBegin = "<!-- config-reference:begin -->\n";
const std::string kEnd = "<!-- config-reference:end -->";

}  // namespace

TEST_CASE("every configuration key rejects a malformed value with an error naming that key") {
  // One malformed value per kind of key; a new kind must add one here.
  const std::map<std::string, std::string> invalid = {
      {"libpq URL", ""},
      {"libpq URL or empty", "db.internal:5432"},
      {"none|session|transaction", "pgbouncer"},
      {"auto|true|false", "sometimes"},
      {"identifier", "Not-A-Schema"},
      {"libpq NAME=VALUE ...", "keepalives"},
      {"list A,B", "a,,b"},
      {"true|false", "perhaps"},
      {"rerun|savepoint", "sometimes"},
      {"HOST:PORT", "nowhere"},
      {"text|json", "xml"},
      {"TYPE=TOPIC,...", "no-topic"},
      {"SOURCE [POLICY]", "cookie:/order/id"},
      {"custom setting name", "tenant_id"},
      {"trace|debug|info|warn|error|critical|off", "loud"},
      // console.admin_token: any value from a flag (only the environment may set it).
      {"secret", "from-a-flag"},
      {"absolute path or empty", "token.txt"},
  };
  for (const auto& key : config_keys()) {
    if (key.name == "kafka.<property>") continue;  // librdkafka judges those: Publisher names kafka.<property>
    std::string value;
    if (key.type.starts_with("count") || key.type.starts_with("milliseconds") || key.type.starts_with("hours")) {
      value = "-1";
    } else {
      INFO("type " << key.type << " has no malformed example");
      REQUIRE(invalid.contains(key.type));
      value = invalid.at(key.type);
    }
    INFO(key.name << " = '" << value << "'");
    CHECK(error_key(key.name, value) == key.name);
    // ... and is a key at all: its own default is accepted.
    if (!key.required) CHECK(error_key(key.name, key.default_value()) == "(no error)");
  }
  CHECK(error_key("publisher.topics.order.created", "") == "publisher.topics.order.created");
}

TEST_CASE("every key set from the environment under its listed variable reaches the options") {
  // Each key's documented value round-trips: environment in, config check out.
  std::vector<std::string> env = kBaseEnv;
  std::map<std::string, std::string> expected = {
      {"worker.claim_limit", "7"},           {"worker.batch_failure_mode", "savepoint"},
      {"worker.backoff_base_ms", "250"},     {"worker.backoff_cap_ms", "9000"},
      {"worker.max_error_bytes", "300"},     {"publisher.max_in_flight_batches", "2"},
      {"publisher.backoff_base_ms", "100"},  {"publisher.backoff_cap_ms", "5000"},
      {"pool.acquire_timeout_ms", "1500"},   {"pool.default_parameters", "connect_timeout=3"},
      {"worker.concurrency", "6"},           {"shutdown.grace_ms", "2500"},
      {"inbox.group_commit", "false"},       {"database.session_url", "postgresql://u@direct/db"},
      {"database.pooler", "session"},        {"database.prepared_statements", "false"},
      {"pool.prepared_check_interval", "8"},
  };
  for (const auto& [name, value] : expected) env.push_back(find_config_key(name)->env + "=" + value);
  const RuntimeConfig config = load_config({.environment = env});
  const auto described = describe(config);
  const std::map<std::string, std::string> shown(described.begin(), described.end());
  for (const auto& [name, value] : expected) {
    INFO(name);
    CHECK(shown.at(name) == value);
  }
  // The seven tunables that could not be set before land in the components' own options.
  CHECK(config.worker.claim_limit == 7);
  CHECK(config.worker.batch_failure_mode == BatchFailureMode::Savepoint);
  CHECK(config.worker.backoff.base == std::chrono::milliseconds(250));
  CHECK(config.worker.backoff.cap == std::chrono::milliseconds(9000));
  CHECK(config.worker.max_error_bytes == 300);
  CHECK(config.publisher.max_in_flight_batches == 2);
  CHECK(config.publisher.backoff.base == std::chrono::milliseconds(100));
  CHECK(config.publisher.backoff.cap == std::chrono::milliseconds(5000));
  CHECK(config.pool.acquire_timeout == std::chrono::milliseconds(1500));
  CHECK(config.worker.shutdown_grace == std::chrono::milliseconds(2500));
  CHECK_FALSE(config.inbox_group_commit);  // on by default
  CHECK(config.pool.session_url == "postgresql://u@direct/db");
  CHECK_FALSE(config.pool.prepared_statements);
  CHECK(config.pool.prepared_check_interval == 8);
}

TEST_CASE("each key's default is the default of the component option it sets") {
  const RuntimeConfig defaults;
  const auto described = describe(defaults);
  const std::map<std::string, std::string> shown(described.begin(), described.end());
  for (const auto& key : config_keys()) {
    if (!key.family.empty() || key.required) continue;
    INFO(key.name);
    CHECK(shown.at(key.name) == key.default_value());
  }
  CHECK(find_config_key("worker.concurrency")->default_value() == std::to_string(WorkerOptions{}.concurrency));
  CHECK(find_config_key("worker.claim_limit")->default_value() == std::to_string(WorkerOptions{}.claim_limit));
  CHECK(find_config_key("publisher.max_in_flight_batches")->default_value() ==
        std::to_string(PublisherOptions{}.max_in_flight_batches));
  CHECK(find_config_key("pool.acquire_timeout_ms")->default_value() ==
        std::to_string(PoolOptions{}.acquire_timeout.count()));
  CHECK(find_config_key("pool.prepared_check_interval")->default_value() ==
        std::to_string(PoolOptions{}.prepared_check_interval));
  CHECK(find_config_key("inbox.group_commit")->default_value() == (InboxOptions{}.group_commit ? "true" : "false"));
}

TEST_CASE("every ConfigError key the libraries throw is a key of the configuration table") {
  // Constructor arguments that a program passes (not configuration) and the test kit's
  // own variable are named as such; everything else must be a real key.
  const std::set<std::string> arguments = {
      "handlers", "inbox.pool", "worker.pool", "outbox.pool", "publisher.pool", "backlog.pool", "backlog.metrics",
      "kafka", "config.file", "BOXCAR_TEST_DATABASE_URL", "console.pool",
      // MigrateOptions a program passes to boxcar::migrate, and `boxcar migrate --role-prefix`.
      "migrate.lock_timeout", "migrate.max_lock_attempts", "migrate.target_version", "roles.role_prefix"};
  const std::regex thrown(R"re(ConfigError\(\s*"([^"]+)")re");
  std::size_t checked = 0;
  for (const char* folder : {"core", "inbox", "outbox", "publisher", "runtime"}) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::filesystem::path(BOXCAR_SOURCE_DIR) / folder)) {
      const auto extension = entry.path().extension();
      if (extension != ".cpp" && extension != ".hpp") continue;
      const std::string text = read(entry.path());
      for (auto match = std::sregex_iterator(text.begin(), text.end(), thrown); match != std::sregex_iterator();
           ++match) {
        const std::string key = (*match)[1];
        if (arguments.contains(key)) continue;
        INFO(entry.path().string() << " throws ConfigError(\"" << key << "\")");
        // "kafka." + name: a literal ending in '.' is the prefix of a family of keys.
        CHECK(find_config_key(key.ends_with('.') ? key + "member" : key) != nullptr);
        ++checked;
      }
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("the configuration reference in docs/runtime.md is the table the keys render") {
  // BOXCAR_REGENERATE_DOCS=1 rewrites the section instead (see docs/runtime.md).
  const auto path = std::filesystem::path(BOXCAR_SOURCE_DIR) / "docs" / "runtime.md";
  std::string doc = read(path);
  const auto begin = doc.find(kBegin);
  const auto end = doc.find(kEnd);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string current = doc.substr(begin + kBegin.size(), end - begin - kBegin.size());
  const std::string rendered = reference_table();
  if (const char* regenerate = std::getenv("BOXCAR_REGENERATE_DOCS"); regenerate && std::string(regenerate) == "1") {
    doc.replace(begin + kBegin.size(), current.size(), rendered);
    std::ofstream(path) << doc;
    return;
  }
  CHECK(current == rendered);
}

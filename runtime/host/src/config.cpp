// Loading RuntimeConfig: defaults < JSON file < environment < flags, validated per key.
#include "boxcar/host/config.hpp"

#include <cctype>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "boxcar/runtime/error.hpp"

extern char** environ;

namespace boxcar {
namespace {

using Setter = std::function<void(RuntimeConfig&, const std::string& key, const std::string& value)>;

std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> items;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    if (first != std::string::npos) items.push_back(item.substr(first, last - first + 1));
  }
  return items;
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

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw ConfigError(key, "expects true or false, got '" + value + "'");
}

Setter size(std::size_t RuntimeConfig::*field, long long min = 1) {
  return [=](RuntimeConfig& c, const std::string& k, const std::string& v) {
    c.*field = static_cast<std::size_t>(parse_number(k, v, min));
  };
}
Setter integer(int RuntimeConfig::*field, long long min) {
  return [=](RuntimeConfig& c, const std::string& k, const std::string& v) {
    c.*field = static_cast<int>(parse_number(k, v, min));
  };
}
Setter millis(std::chrono::milliseconds RuntimeConfig::*field) {
  return [=](RuntimeConfig& c, const std::string& k, const std::string& v) {
    c.*field = std::chrono::milliseconds(parse_number(k, v, 1));
  };
}
Setter text(std::string RuntimeConfig::*field) {
  return [=](RuntimeConfig& c, const std::string&, const std::string& v) { c.*field = v; };
}
Setter list(std::vector<std::string> RuntimeConfig::*field) {
  return [=](RuntimeConfig& c, const std::string&, const std::string& v) { c.*field = split_list(v); };
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"database.url", text(&RuntimeConfig::database_url)},
      {"schema", text(&RuntimeConfig::schema)},
      {"pool.size", size(&RuntimeConfig::pool_size)},
      {"consumers", list(&RuntimeConfig::consumers)},
      {"worker.enabled",
       [](RuntimeConfig& c, const std::string& k, const std::string& v) { c.worker_enabled = parse_bool(k, v); }},
      {"worker.consumers", list(&RuntimeConfig::worker_consumers)},
      {"worker.concurrency", size(&RuntimeConfig::worker_concurrency)},
      {"worker.batch_size", size(&RuntimeConfig::worker_batch_size)},
      {"worker.lease_ms", millis(&RuntimeConfig::worker_lease)},
      {"worker.handler_timeout_ms", millis(&RuntimeConfig::worker_handler_timeout)},
      {"worker.max_attempts", integer(&RuntimeConfig::worker_max_attempts, 1)},
      {"worker.poll_interval_ms", millis(&RuntimeConfig::worker_poll_interval)},
      {"publisher.batch_size", size(&RuntimeConfig::publisher_batch_size)},
      {"publisher.max_attempts", integer(&RuntimeConfig::publisher_max_attempts, 0)},
      {"publisher.delivery_timeout_ms", millis(&RuntimeConfig::publisher_delivery_timeout)},
      {"publisher.lease_ms", millis(&RuntimeConfig::publisher_lease)},
      {"publisher.poll_interval_ms", millis(&RuntimeConfig::publisher_poll_interval)},
      {"publisher.topics",
       [](RuntimeConfig& c, const std::string& k, const std::string& v) {
         for (const auto& pair : split_list(v)) {
           const auto eq = pair.find('=');
           if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
             throw ConfigError(k, "expects EVENT_TYPE=TOPIC[,...], got '" + pair + "'");
           c.publisher_topics[pair.substr(0, eq)] = pair.substr(eq + 1);
         }
       }},
      {"http.listen", text(&RuntimeConfig::http_listen)},
      {"metrics.backlog_interval_ms", millis(&RuntimeConfig::backlog_interval)},
      {"shutdown.grace_ms", millis(&RuntimeConfig::shutdown_grace)},
      {"log.format", text(&RuntimeConfig::log_format)},
      {"log.level", text(&RuntimeConfig::log_level)},
  };
  return table;
}

void apply(RuntimeConfig& config, const std::string& key, const std::string& value) {
  if (key.starts_with("kafka.") && key.size() > 6) {
    config.kafka[key.substr(6)] = value;
    return;
  }
  if (key.starts_with("publisher.topics.") && key.size() > 17) {
    config.publisher_topics[key.substr(17)] = value;
    return;
  }
  const auto setter = setters().find(key);
  if (setter == setters().end()) throw ConfigError(key, "is not a Boxcar configuration key");
  setter->second(config, key, value);
}

std::string env_name(const std::string& key) {
  std::string name = "BOXCAR_";
  for (char c : key) name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void flatten(const nlohmann::json& json, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (json.is_object() && !(prefix == "kafka" || prefix == "publisher.topics")) {
    for (const auto& [name, value] : json.items()) flatten(value, prefix.empty() ? name : prefix + "." + name, out);
  } else if (json.is_object()) {  // kafka properties and topic maps contain dots themselves
    for (const auto& [name, value] : json.items())
      out.emplace_back(prefix + "." + name, value.is_string() ? value.get<std::string>() : value.dump());
  } else if (json.is_array()) {
    std::string joined;
    for (const auto& item : json) joined += (joined.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
    out.emplace_back(prefix, joined);
  } else {
    out.emplace_back(prefix, json.is_string() ? json.get<std::string>() : json.dump());
  }
}

std::vector<std::string> process_environment() {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) env.emplace_back(*entry);
  return env;
}

void validate(const RuntimeConfig& c) {
  if (c.database_url.empty()) throw ConfigError("database.url", "is required (BOXCAR_DATABASE_URL or --database-url)");
  if (c.log_format != "text" && c.log_format != "json") throw ConfigError("log.format", "expects text or json");
  static const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::find(levels.begin(), levels.end(), c.log_level) == levels.end())
    throw ConfigError("log.level", "expects one of trace, debug, info, warn, error, critical, off");
  if (!c.http_listen.empty()) {
    const auto colon = c.http_listen.rfind(':');
    if (colon == std::string::npos || colon + 1 == c.http_listen.size() ||
        c.http_listen.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      throw ConfigError("http.listen", "expects HOST:PORT (port 0 picks a free one), got '" + c.http_listen + "'");
  }
}

bool is_secret(const std::string& key) {
  std::string lower = key;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("password") != std::string::npos || lower.find("secret") != std::string::npos ||
         (lower.find("key") != std::string::npos && lower.starts_with("kafka.ssl")) ||
         lower.find("sasl.oauthbearer.config") != std::string::npos;
}

}  // namespace

std::string redact_url(const std::string& url) {
  std::string out = url;
  // postgresql://user:password@host
  const auto scheme = out.find("://");
  const auto at = out.find('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
    const auto colon = out.find(':', scheme + 3);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // key=value form and URL query: password=...
  for (const std::string marker : {"password=", "sslpassword="}) {
    for (auto pos = out.find(marker); pos != std::string::npos; pos = out.find(marker, pos + 1)) {
      const auto start = pos + marker.size();
      const auto end = out.find_first_of(" &", start);
      out.replace(start, (end == std::string::npos ? out.size() : end) - start, "***");
    }
  }
  return out;
}

RuntimeConfig load_config(const ConfigSources& sources) {
  RuntimeConfig config;
  const std::vector<std::string> env = sources.environment ? *sources.environment : process_environment();
  std::map<std::string, std::string> env_values;
  for (const auto& entry : env) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env_values[entry.substr(0, eq)] = entry.substr(eq + 1);
  }

  // 1. The file: --config, else BOXCAR_CONFIG.
  std::string file = sources.file;
  for (const auto& [key, value] : sources.flags)
    if (key == "config") file = value;
  if (file.empty() && env_values.contains("BOXCAR_CONFIG")) file = env_values["BOXCAR_CONFIG"];
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw ConfigError("config.file", "cannot read '" + file + "'");
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError("config.file", "'" + file + "' is not valid JSON: " + e.what());
    }
    if (!json.is_object()) throw ConfigError("config.file", "'" + file + "' must hold a JSON object");
    std::vector<std::pair<std::string, std::string>> pairs;
    flatten(json, "", pairs);
    for (const auto& [key, value] : pairs) apply(config, key, value);
  }

  // 2. The environment: known keys only (other BOXCAR_* variables belong to others).
  for (const auto& [key, setter] : setters()) {
    const auto found = env_values.find(env_name(key));
    if (found != env_values.end()) apply(config, key, found->second);
  }
  for (const auto& [name, value] : env_values) {
    if (!name.starts_with("BOXCAR_KAFKA_") || name.size() <= 13) continue;
    std::string property = name.substr(13);
    for (char& ch : property) ch = ch == '_' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    config.kafka[property] = value;
  }

  // 3. Flags.
  for (const auto& [key, value] : sources.flags)
    if (key != "config") apply(config, key, value);

  validate(config);
  return config;
}

std::vector<std::pair<std::string, std::string>> describe(const RuntimeConfig& c) {
  const auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
  };
  std::vector<std::pair<std::string, std::string>> out = {
      {"database.url", redact_url(c.database_url)},
      {"schema", c.schema},
      {"pool.size", std::to_string(c.pool_size)},
      {"consumers", join(c.consumers)},
      {"worker.enabled", c.worker_enabled ? "true" : "false"},
      {"worker.consumers", join(c.worker_consumers)},
      {"worker.concurrency", std::to_string(c.worker_concurrency)},
      {"worker.batch_size", std::to_string(c.worker_batch_size)},
      {"worker.lease_ms", std::to_string(c.worker_lease.count())},
      {"worker.handler_timeout_ms", std::to_string(c.worker_handler_timeout.count())},
      {"worker.max_attempts", std::to_string(c.worker_max_attempts)},
      {"worker.poll_interval_ms", std::to_string(c.worker_poll_interval.count())},
      {"publisher.batch_size", std::to_string(c.publisher_batch_size)},
      {"publisher.max_attempts", std::to_string(c.publisher_max_attempts)},
      {"publisher.delivery_timeout_ms", std::to_string(c.publisher_delivery_timeout.count())},
      {"publisher.lease_ms", std::to_string(c.publisher_lease.count())},
      {"publisher.poll_interval_ms", std::to_string(c.publisher_poll_interval.count())},
      {"http.listen", c.http_listen},
      {"metrics.backlog_interval_ms", std::to_string(c.backlog_interval.count())},
      {"shutdown.grace_ms", std::to_string(c.shutdown_grace.count())},
      {"log.format", c.log_format},
      {"log.level", c.log_level},
  };
  for (const auto& [type, topic] : c.publisher_topics) out.emplace_back("publisher.topics." + type, topic);
  for (const auto& [name, value] : c.kafka) out.emplace_back("kafka." + name, is_secret("kafka." + name) ? "***" : value);
  return out;
}

}  // namespace boxcar

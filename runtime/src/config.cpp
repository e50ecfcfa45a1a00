// Loading RuntimeConfig: defaults < JSON file < environment < flags, each key parsed and
// validated by its row of the key table (config_keys.cpp).
#include "boxcar/runtime/config.hpp"

#include <cctype>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "boxcar/core/error.hpp"
#include "boxcar/core/redaction.hpp"

extern char** environ;

namespace boxcar {
namespace {

// A secret that may come only from the environment: a configuration file or a flag ends up
// in version control, a process list or a shell history. (An empty value, which sets
// nothing secret, is let through.)
constexpr const char* kEnvironmentOnly = "console.admin_token";

void apply(RuntimeConfig& config, const std::string& key, const std::string& value) {
  const ConfigKey* found = find_config_key(key);
  if (found == nullptr) throw ConfigError(key, "is not a Boxcar configuration key");
  found->set(config, key, value);
}

// A family's members keep their dots in a file: {"kafka": {"bootstrap.servers": ...}}.
bool is_family(const std::string& prefix) {
  for (const auto& key : config_keys())
    if (!key.family.empty() && key.family == prefix + ".") return true;
  return false;
}

void flatten(const nlohmann::json& json, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (json.is_object() && !is_family(prefix)) {
    for (const auto& [name, value] : json.items()) flatten(value, prefix.empty() ? name : prefix + "." + name, out);
  } else if (json.is_object()) {
    for (const auto& [name, value] : json.items())
      out.emplace_back(prefix + "." + name, value.is_string() ? value.get<std::string>() : value.dump());
  } else if (json.is_array()) {
    std::string joined;
    for (const auto& item : json)
      joined += (joined.empty() ? "" : ",") + (item.is_string() ? item.get<std::string>() : item.dump());
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

// Known variables only (other BOXCAR_* variables belong to others). A family's variable
// ends in a placeholder: BOXCAR_KAFKA_<PROPERTY> -> kafka.<property>, '_' as '.'.
void apply_environment(RuntimeConfig& config, const std::map<std::string, std::string>& env) {
  for (const auto& key : config_keys()) {
    if (key.env.empty()) continue;
    const auto placeholder = key.env.find('<');
    if (placeholder == std::string::npos) {
      const auto found = env.find(key.env);
      if (found != env.end()) apply(config, key.name, found->second);
      continue;
    }
    const std::string prefix = key.env.substr(0, placeholder);
    for (const auto& [name, value] : env) {
      if (!name.starts_with(prefix) || name.size() <= prefix.size()) continue;
      std::string member = name.substr(prefix.size());
      for (char& ch : member) ch = ch == '_' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      apply(config, key.family + member, value);
    }
  }
}

void validate(const RuntimeConfig& config) {
  const RuntimeConfig defaults;
  for (const auto& key : config_keys())
    if (key.required && key.show(config) == key.show(defaults))
      throw ConfigError(key.name, "is required (" + key.env + " or --set " + key.name + "=...)");
  validate_retention(config.janitor.retention, "retention.inbox_hours", "retention.redelivery_horizon_hours",
                     "retention.dead_hours");
}

}  // namespace

std::string redact_url(const std::string& url) { return redact_connection_string(url); }

void apply_config_file(RuntimeConfig& config, std::string_view json_text, const std::string& file) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("config.file", "'" + file + "' is not valid JSON: " + e.what());
  }
  if (!json.is_object()) throw ConfigError("config.file", "'" + file + "' must hold a JSON object");
  std::vector<std::pair<std::string, std::string>> pairs;
  flatten(json, "", pairs);
  for (const auto& [key, value] : pairs) {
    // {"": ...} flattens to the empty key, and an error naming "" names nothing (found by tests/fuzz).
    if (key.empty()) throw ConfigError("config.file", "'" + file + "' has a member with an empty name");
    if (key == kEnvironmentOnly && !value.empty())
      throw ConfigError(key,
                        "is a secret: set BOXCAR_CONSOLE_ADMIN_TOKEN or console.admin_token_file, not '" + file + "'");
    apply(config, key, value);
  }
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
    std::ifstream in(file, std::ios::binary);
    if (!in) throw ConfigError("config.file", "cannot read '" + file + "'");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    apply_config_file(config, text, file);
  }

  // 2. The environment.
  apply_environment(config, env_values);

  // 3. Flags.
  for (const auto& [key, value] : sources.flags) {
    if (key == kEnvironmentOnly && !value.empty())
      throw ConfigError(key, "is a secret: set BOXCAR_CONSOLE_ADMIN_TOKEN or console.admin_token_file, not a flag");
    if (key != "config") apply(config, key, value);
  }

  validate(config);
  apply_pooler_settings(config);
  return config;
}

std::vector<std::pair<std::string, std::string>> describe(const RuntimeConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& key : config_keys())
    for (auto& shown : key.show(config)) out.push_back(std::move(shown));
  return out;
}

}  // namespace boxcar

#include <catch2/catch.hpp>

#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>

#include "boxcar/runtime/config.hpp"
#include "boxcar/core/error.hpp"

using namespace boxcar;

namespace {

std::string write_file(const std::string& text) {
  char path[] = "/tmp/boxcar-config-XXXXXX";
  const int fd = mkstemp(path);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

std::string key_of(const std::function<void()>& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "(no error)";
}

const std::vector<std::string> kBaseEnv = {"BOXCAR_DATABASE_URL=postgresql://u:secret@h/db"};

}  // namespace

TEST_CASE("configuration precedence is defaults, then the file, then the environment, then flags") {
  const std::string file = write_file(R"({"worker": {"concurrency": 3, "batch_size": 8}, "consumers": ["a", "b"],
                                         "kafka": {"bootstrap.servers": "file:9092"}})");
  auto env = kBaseEnv;
  CHECK(load_config({.environment = env}).worker.concurrency == 4);  // default
  CHECK(load_config({.file = file, .environment = env}).worker.concurrency == 3);
  env.push_back("BOXCAR_WORKER_CONCURRENCY=5");
  env.push_back("BOXCAR_KAFKA_BOOTSTRAP_SERVERS=env:9092");
  const auto from_env = load_config({.file = file, .environment = env});
  CHECK(from_env.worker.concurrency == 5);
  CHECK(from_env.worker.batch_size == 8);  // only in the file
  CHECK(from_env.consumers == std::vector<std::string>{"a", "b"});
  CHECK(from_env.publisher.kafka.at("bootstrap.servers") == "env:9092");
  const auto from_flags =
      load_config({.file = file,
                   .environment = env,
                   .flags = {{"worker.concurrency", "7"}, {"kafka.bootstrap.servers", "flag:9092"}}});
  CHECK(from_flags.worker.concurrency == 7);
  CHECK(from_flags.publisher.kafka.at("bootstrap.servers") == "flag:9092");
  // BOXCAR_CONFIG names the file when no flag does.
  env.push_back("BOXCAR_CONFIG=" + file);
  CHECK(load_config({.environment = env}).worker.batch_size == 8);
}

TEST_CASE("invalid configuration names the offending key") {
  const auto env = kBaseEnv;
  CHECK(key_of([&] { load_config({.environment = std::vector<std::string>{}}); }) == "database.url");
  CHECK(key_of([&] {
          load_config({.environment = env, .flags = {{"worker.concurrency", "many"}}});
        }) == "worker.concurrency");
  CHECK(key_of([&] {
          load_config({.environment = env, .flags = {{"worker.concurency", "2"}}});
        }) == "worker.concurency");
  CHECK(key_of([&] {
          load_config({.environment = env, .flags = {{"worker.enabled", "perhaps"}}});
        }) == "worker.enabled");
  CHECK(key_of([&] { load_config({.environment = env, .flags = {{"http.listen", "nowhere"}}}); }) == "http.listen");
  CHECK(key_of([&] { load_config({.environment = env, .flags = {{"log.format", "xml"}}}); }) == "log.format");
  CHECK(key_of([&] { load_config({.file = write_file(R"({"worker": {"concurrecny": 1}})"), .environment = env}); }) ==
        "worker.concurrecny");
  CHECK(key_of([&] { load_config({.file = write_file("{not json"), .environment = env}); }) == "config.file");
  auto bad_env = env;
  bad_env.push_back("BOXCAR_WORKER_MAX_ATTEMPTS=0");
  CHECK(key_of([&] { load_config({.environment = bad_env}); }) == "worker.max_attempts");
}

TEST_CASE("the effective configuration hides secrets") {
  auto env = kBaseEnv;
  env.push_back("BOXCAR_KAFKA_SASL_PASSWORD=hunter2");
  env.push_back("BOXCAR_KAFKA_SASL_USERNAME=svc");
  const auto described = describe(load_config({.environment = env}));
  std::map<std::string, std::string> values(described.begin(), described.end());
  CHECK(values.at("database.url") == "postgresql://u:***@h/db");
  CHECK(values.at("kafka.sasl.password") == "***");
  CHECK(values.at("kafka.sasl.username") == "svc");
  CHECK(redact_url("host=h password=pw dbname=x") == "host=h password=*** dbname=x");
  CHECK(redact_url("host=h password = 'a b\\' c' dbname=x") == "host=h password = *** dbname=x");
  CHECK(redact_url("postgresql://u@h/db?PASSWORD=pw") == "postgresql://u@h/db?PASSWORD=***");
}

TEST_CASE("config check prints the effective configuration and exits 2 naming a bad key") {
  const std::string ok = std::string("BOXCAR_DATABASE_URL=postgresql://u:pw@h/db BOXCAR_WORKER_CONCURRENCY=5 ") +
                         BOXCAR_CLI_PATH + " --set worker.batch_size=9 config check 2>&1";
  std::string output;
  FILE* pipe = popen(ok.c_str(), "r");
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  CHECK(WEXITSTATUS(pclose(pipe)) == 0);
  CHECK(output.find("worker.concurrency = 5") != std::string::npos);
  CHECK(output.find("worker.batch_size = 9") != std::string::npos);
  CHECK(output.find("postgresql://u:***@h/db") != std::string::npos);
  CHECK(output.find(":pw@") == std::string::npos);

  const std::string bad = std::string("BOXCAR_DATABASE_URL=postgresql://h/db BOXCAR_WORKER_BATCH_SIZE=zero ") +
                          BOXCAR_CLI_PATH + " config check 2>&1";
  output.clear();
  pipe = popen(bad.c_str(), "r");
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  CHECK(WEXITSTATUS(pclose(pipe)) == 2);
  CHECK(output.find("worker.batch_size") != std::string::npos);
  CHECK(output.find("CONFIG_INVALID") != std::string::npos);
}

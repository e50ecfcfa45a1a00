#include <catch2/catch.hpp>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/sql_identifier.hpp"

using boxcar::with_default_parameters;

TEST_CASE("default libpq parameters are appended to a URL as query parameters") {
  CHECK(with_default_parameters("postgresql://u@h:5432/db", "keepalives=1 connect_timeout=10") ==
        "postgresql://u@h:5432/db?keepalives=1&connect_timeout=10");
  CHECK(with_default_parameters("postgresql://u@h/db?sslmode=require", "keepalives=1") ==
        "postgresql://u@h/db?sslmode=require&keepalives=1");
}

TEST_CASE("parameters the URL already sets are not overridden") {
  CHECK(with_default_parameters("postgresql://u@h/db?connect_timeout=3", "connect_timeout=10 keepalives=1") ==
        "postgresql://u@h/db?connect_timeout=3&keepalives=1");
  CHECK(with_default_parameters("host=h connect_timeout=3", "connect_timeout=10 keepalives=1") ==
        "host=h connect_timeout=3 keepalives=1");
}

TEST_CASE("a pool with no URL, size zero or check interval zero is a configuration error naming the key") {
  try {
    boxcar::ConnectionPool::create({.url = ""});
    FAIL("expected ConfigError");
  } catch (const boxcar::ConfigError& e) {
    CHECK(e.key() == "database.url");
    CHECK(e.code() == "CONFIG_INVALID");
  }
  try {
    boxcar::ConnectionPool::create({.url = "postgresql://x/y", .size = 0});
    FAIL("expected ConfigError");
  } catch (const boxcar::ConfigError& e) {
    CHECK(e.key() == "pool.size");
  }
  try {
    boxcar::ConnectionPool::create({.url = "postgresql://x/y", .prepared_check_interval = 0});
    FAIL("expected ConfigError");
  } catch (const boxcar::ConfigError& e) {
    CHECK(e.key() == "pool.prepared_check_interval");
  }
}

TEST_CASE("schema names are restricted to plain lower-case identifiers") {
  CHECK(boxcar::validate_schema_name("boxcar") == "boxcar");
  CHECK(boxcar::validate_schema_name("_app_2") == "_app_2");
  CHECK_THROWS_AS(boxcar::validate_schema_name(""), boxcar::ConfigError);
  CHECK_THROWS_AS(boxcar::validate_schema_name("Boxcar"), boxcar::ConfigError);
  CHECK_THROWS_AS(boxcar::validate_schema_name("a;drop"), boxcar::ConfigError);
  CHECK_THROWS_AS(boxcar::validate_schema_name("1abc"), boxcar::ConfigError);
  CHECK_THROWS_AS(boxcar::validate_schema_name(std::string(49, 'a')), boxcar::ConfigError);
  CHECK(boxcar::quote_identifier("a\"b") == "\"a\"\"b\"");
}

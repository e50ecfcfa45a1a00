#include <catch2/catch.hpp>

#include "boxcar/testing/detail/database_url.hpp"

using boxcar::detail::with_database;

TEST_CASE("a URL names another database by its path, keeping its other parameters") {
  CHECK(with_database("postgresql://boxcar@127.0.0.1:5432/postgres", "test_a") ==
        "postgresql://boxcar@127.0.0.1:5432/test_a");
  CHECK(with_database("postgres://u:p@h/db?sslmode=require&connect_timeout=3", "test_a") ==
        "postgres://u:p@h/test_a?sslmode=require&connect_timeout=3");
  CHECK(with_database("postgresql://h", "test_a") == "postgresql://h/test_a");
  CHECK(with_database("postgresql://h:5432?sslmode=disable", "test_a") == "postgresql://h:5432/test_a?sslmode=disable");
  CHECK(with_database("postgresql:///db?host=/run/postgresql", "test_a") ==
        "postgresql:///test_a?host=/run/postgresql");
}

TEST_CASE("a dbname query parameter, which would win over the path, is dropped from the URL") {
  CHECK(with_database("postgresql://h/db?dbname=other&sslmode=require", "test_a") ==
        "postgresql://h/test_a?sslmode=require");
  CHECK(with_database("postgresql://h/?dbname=other", "test_a") == "postgresql://h/test_a");
}

TEST_CASE("a keyword/value connection string gets a dbname that overrides its own") {
  CHECK(with_database("host=h port=5432 dbname=postgres", "test_a") ==
        "host=h port=5432 dbname=postgres dbname=test_a");
}

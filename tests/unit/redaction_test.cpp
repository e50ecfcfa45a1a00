// Redaction of database secrets: both libpq connection-string forms tokenized (quoting,
// backslash escapes, percent-encoding, query parameters, any keyword case), secrets
// inside longer text, and libpq's own connection errors that echo the password.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "boxcar/core/redaction.hpp"

using boxcar::redact_connection_error;
using boxcar::redact_connection_string;
using boxcar::redact_secrets;
using Catch::Matchers::Contains;

namespace {

// Every password here holds the marker in each piece a parser could split it into.
const std::vector<std::string> kHostilePasswords = {
    "S3cr3t%zzS3cr3t", "S3cr3t'S3cr3t",  "S3cr3t\\S3cr3t",       "S3cr3t S3cr3t", "S3cr3t=S3cr3t",
    "S3cr3t@S3cr3t",   "S3cr3t:S3cr3t",  "S3cr3t/S3cr3t",        "S3cr3t?S3cr3t", "S3cr3t&S3cr3t",
    "S3cr3t#S3cr3t",   "S3cr3t\nS3cr3t", "S3cr3t\xc3\xa9S3cr3t", "S3cr3t\"S3cr3t"};

// The keyword/value form of `password`: quoted with ' and backslash escapes, as libpq reads it.
std::string quoted(const std::string& password) {
  std::string out = "'";
  for (const char c : password) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

TEST_CASE("a keyword/value connection string keeps everything but its passwords") {
  CHECK(redact_connection_string("host=h password=pw dbname=x") == "host=h password=*** dbname=x");
  CHECK(redact_connection_string("host=h password = pw dbname=x") == "host=h password = *** dbname=x");
  CHECK(redact_connection_string("host=h password='a b\\' c' dbname=x") == "host=h password=*** dbname=x");
  CHECK(redact_connection_string("host=h PassWord=pw sslpassword=key dbname=x") ==
        "host=h PassWord=*** sslpassword=*** dbname=x");
  CHECK(redact_connection_string("host=h password=a\\ b user=u") == "host=h password=*** user=u");
  CHECK(redact_connection_string("host=h password='unterminated dbname=x") == "host=h password=***");
}

TEST_CASE("a bare word after a keyword/value password is taken as part of it") {
  // libpq rejects `password=a bSECRET` with `missing "=" after "bSECRET"`: a human meant it.
  CHECK(redact_connection_string("host=h password=a bSECRET user=u") == "host=h password=*** user=u");
  CHECK(redact_connection_string("password=a b=c user=u") == "password=*** user=u");
}

TEST_CASE("a URI keeps everything but the password in its user info and query") {
  CHECK(redact_connection_string("postgresql://u:pw@h/db") == "postgresql://u:***@h/db");
  CHECK(redact_connection_string("postgres://u:pa%40ss@h:5432/db?sslmode=require") ==
        "postgres://u:***@h:5432/db?sslmode=require");
  CHECK(redact_connection_string("postgresql://u@h/db?password=pw&sslmode=require") ==
        "postgresql://u@h/db?password=***&sslmode=require");
  CHECK(redact_connection_string("postgresql://u@h/db?PASSWORD=pw&sslpassword=k") ==
        "postgresql://u@h/db?PASSWORD=***&sslpassword=***");
  CHECK(redact_connection_string("postgresql://u@h/db?password=a&b&user=u") ==
        "postgresql://u@h/db?password=***&user=u");
  CHECK(redact_connection_string("postgresql://u@h/db") == "postgresql://u@h/db");
  CHECK(redact_connection_string("postgresql://h1:5432,h2:5433/db") == "postgresql://h1:5432,h2:5433/db");
}

TEST_CASE("hostile passwords never survive redaction in either form") {
  for (const auto& password : kHostilePasswords) {
    INFO(password);
    const auto kv = redact_connection_string("host=h user=u password=" + quoted(password) + " dbname=x");
    CHECK_THAT(kv, !Contains("S3cr3t"));
    CHECK_THAT(kv, Contains("dbname=x"));
    const auto raw_uri = redact_connection_string("postgresql://u:" + password + "@h:5432/db");
    CHECK_THAT(raw_uri, !Contains("S3cr3t"));
    const auto query = redact_connection_string("postgresql://u@h:5432/db?password=" + password + "&sslmode=disable");
    CHECK_THAT(query, !Contains("S3cr3t"));
    CHECK_THAT(query, Contains("sslmode=disable"));
  }
}

TEST_CASE("secrets inside a longer message are redacted") {
  CHECK(redact_secrets("could not connect with \"host=h password=pw\": refused") ==
        "could not connect with \"host=h password=***\": refused");
  CHECK(redact_secrets("url postgresql://u:pw@h/db failed") == "url postgresql://u:***@h/db failed");
  CHECK(redact_secrets("bad URI: \"postgresql://u:p w@[::1x/db\"") == "bad URI: \"postgresql://u:***@[::1x/db\"");
  CHECK(redact_secrets("x Password = 'a b' y") == "x Password = *** y");
  CHECK(redact_secrets("password authentication failed for user \"u\"") ==
        "password authentication failed for user \"u\"");
}

TEST_CASE("libpq connection errors that echo the password are redacted") {
  // Texts as libpq 15 prints them for these strings (checked against a real server).
  CHECK(redact_connection_error("invalid percent-encoded token: \"pa%zzSECRET\"",
                                "postgresql://u:pa%zzSECRET@127.0.0.1:5432/db") ==
        "invalid percent-encoded token: \"***\"");
  CHECK(redact_connection_error("could not translate host name \"ssSECRET@127.0.0.1\" to address",
                                "postgresql://u:p@ssSECRET@127.0.0.1:5432/db") ==
        "could not translate host name \"***\" to address");
  CHECK(redact_connection_error("invalid integer value \"paSECRET\" for connection option \"port\"",
                                "postgresql://u:paSECRET/ss@127.0.0.1:5432/db") ==
        "invalid integer value \"***\" for connection option \"port\"");
  CHECK(redact_connection_error("missing \"=\" after \"bSECRET\" in connection info string",
                                "host=h user=u password=a bSECRET") ==
        "missing \"=\" after \"***\" in connection info string");
  CHECK(redact_connection_error("invalid URI query parameter: \"bSECRET\"",
                                "postgresql://u@h/db?password=a&bSECRET=c") == "invalid URI query parameter: \"***\"");
  const std::string uri = "postgresql://u:paSECRET@[::1x/db";
  CHECK(
      redact_connection_error(
          "end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"" + uri + "\"", uri) ==
      "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
      "\"postgresql://u:***@[::1x/db\"");
  // Nothing secret: unchanged.
  CHECK(redact_connection_error("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  role \"u\" does "
                                "not exist",
                                "postgresql://u:pw@127.0.0.1:5432/db") ==
        "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  role \"u\" does not exist");
}

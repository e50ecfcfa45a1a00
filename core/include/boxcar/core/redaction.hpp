// Removal of database secrets from text before it reaches a log line, an exception
// message, a probe body or stderr. libpq's own connection errors can quote the
// connection string or the password itself (`invalid percent-encoded token: "..."`,
// `missing "=" after "..."`), so every place that opens a connection passes its error
// through redact_connection_error(), and the configuration shows redact_connection_string().
// Both libpq forms are tokenized (docs: libpq "Connection Strings"): keyword/value with
// quoting and backslash escapes, and postgres:// URIs with percent-encoding and query
// parameters. Keywords are matched case-insensitively so a misspelt `PASSWORD=` is
// hidden too.
#pragma once

#include <string>
#include <string_view>

namespace boxcar {

/// `conninfo` (a URI or a keyword/value string) with every password and sslpassword
/// value replaced by "***"; everything else unchanged. A malformed string is redacted
/// generously: a word that libpq would reject after a password is taken as part of it.
std::string redact_connection_string(std::string_view conninfo);

/// `text` (free text such as an error message) with the secrets of any connection string
/// or `password = value` pair inside it replaced by "***".
std::string redact_secrets(std::string_view text);

/// `error`, produced while connecting with `conninfo`, with the connection string, the
/// password (as written and decoded) and any quoted fragment of it that libpq echoed
/// replaced by "***"; then redact_secrets().
std::string redact_connection_error(std::string_view error, std::string_view conninfo);

}  // namespace boxcar

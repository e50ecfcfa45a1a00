// database.pooler: the settings a connection pooler between Boxcar and PostgreSQL needs,
// checked once at startup so an unsupported combination fails with what to change
// instead of misbehaving later (docs/operations.md, "PgBouncer").
#include "boxcar/core/error.hpp"
#include "boxcar/runtime/config.hpp"

namespace boxcar {

void apply_pooler_settings(RuntimeConfig& config) {
  const bool transaction_pooling = config.pooler == "transaction";
  if (transaction_pooling) {
    // Each transaction may run on another server connection: a LISTEN would be heard by
    // whichever session ran it (then by no one), and the migration runner's session
    // advisory lock would be held by a session it no longer talks to.
    if (config.pool.session_url.empty())
      throw ConfigError(
          "database.session_url",
          "is required with database.pooler = transaction: the wake-up listener (LISTEN), the "
          "migration lock and the janitor need a session of their own; set it to a URL that reaches PostgreSQL "
          "directly, not through PgBouncer (BOXCAR_DATABASE_SESSION_URL), or use pool_mode = session "
          "and database.pooler = session");
    if (config.pool.session_url == config.pool.url)
      throw ConfigError("database.session_url",
                        "must reach PostgreSQL directly, not the transaction pooler database.url points at");
  }
  if (config.prepared_statements == "true" && transaction_pooling)
    throw ConfigError("database.prepared_statements",
                      "cannot be true with database.pooler = transaction: PgBouncer 1.18 does not keep server-side "
                      "prepared statements across transactions (a statement prepared on one server connection is "
                      "missing on the next); set it to false or auto");
  config.pool.prepared_statements =
      config.prepared_statements == "true" || (config.prepared_statements == "auto" && !transaction_pooling);
}

}  // namespace boxcar

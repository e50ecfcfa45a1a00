// Translates node-postgres failures at the boundary, as the C++ detail::to_database_error
// does (core/src/database_errors.cpp): by SQLSTATE and by whether a write may have
// committed, never by parsing message text.

/** The server's SQLSTATE of `error`, or "" when no server answered (a lost or refused
 * connection, a timeout). */
export function sqlstateOf(error: unknown): string {
  const e = error as { code?: unknown; severity?: unknown } | null;
  if (e && typeof e.code === 'string' && typeof e.severity === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) {
    return e.code;
  }
  return '';
}

export interface DatabaseFailure {
  message: string;
  /** The server's SQLSTATE, or 08006 (connection failure) when none answered. */
  sqlstate: string;
  /** The write may or may not have committed. */
  uncertain: boolean;
}

/**
 * What `error` means for a write. `commitInFlight`: a statement that commits on its own
 * (autocommit) or a COMMIT was sent, so a connection lost now leaves the outcome unknown.
 * An admin shutdown or a terminated backend (57P01, 57P02) or a connection exception (08)
 * during such a write is as uncertain as a lost connection: the server may have committed
 * before it went away.
 */
export function toDatabaseFailure(error: unknown, doing: string, commitInFlight: boolean): DatabaseFailure {
  const text = error instanceof Error ? error.message : String(error);
  const state = sqlstateOf(error);
  if (state === '') {
    return {
      message: `${doing}: ${commitInFlight ? 'connection lost while the write may have committed: ' : ''}${text}`,
      sqlstate: '08006',
      uncertain: commitInFlight,
    };
  }
  const lost = state === '57P01' || state === '57P02' || state.startsWith('08');
  return { message: `${doing}: ${text}`, sqlstate: state, uncertain: lost && commitInFlight };
}

const guarded = new WeakSet<object>();

/**
 * Keeps a lost connection of a checked-out client from crashing the process. node-postgres
 * emits 'error' on a client whose connection ends unexpectedly, and pg's pool listens only
 * while the client is idle in it; the failure itself reaches the caller as the rejected
 * query, which is where it is translated. Attached once per client.
 */
export function guardClient<T extends { on(event: 'error', listener: (error: Error) => void): unknown }>(client: T): T {
  if (!guarded.has(client)) {
    client.on('error', () => undefined);
    guarded.add(client);
  }
  return client;
}

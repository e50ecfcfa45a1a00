// status(): exact counts of receipts and events by status, the document `boxcar status
// --json` prints (ops/src/operator_format.cpp, to_json(StatusReport); docs/operator.md,
// "JSON formats"), read in one read-only REPEATABLE READ snapshot. It needs a role that may
// read both tables' status columns (the operator role, boxcar_operator); the ingress role
// may not read the outbox.
import type { Pool, QueryResultRow } from 'pg';

import { guardClient } from './database_errors';
import { kBlockedKeys, kInboxStatus, kOutboxStatus, kXminHolder, withSchema } from './queries';
import { scopeText } from './scope';

/** The version of the document, "format_version" (C++ kStatusFormatVersion). */
export const STATUS_FORMAT_VERSION = 1;
/** Receipts waiting behind a blocked key, counted up to this many (kBlockedKeyWaitingCap). */
export const BLOCKED_KEY_WAITING_CAP = 10000;
/** Blocked keys listed at most. */
const kBlockedKeysListed = 100;

export interface InboxCounts {
  pending: number;
  processing: number;
  retryable: number;
  completed: number;
  waiting: number;
  dead: number;
  discarded: number;
  oldest_due_age_seconds: number;
}

export interface InboxConsumerStatus extends InboxCounts {
  consumer: string;
  declared: boolean;
}

export interface BlockedKeyStatus {
  consumer: string;
  scope: string;
  key: string;
  receipt_id: number;
  status: string;
  attempts: number;
  error_type: string;
  error: string;
  waiting: number;
  blocked_seconds: number;
}

/** The session holding back the xmin horizon the longest (docs/operations.md): what keeps
 * vacuum from removing dead rows. */
export interface XminHolder {
  pid: number;
  application_name: string;
  user: string;
  database: string;
  state: string;
  backend_type: string;
  /** Transactions since the session's xmin (or xid). */
  xmin_age: number;
  transaction_age_seconds: number;
  /** ISO 8601 UTC with milliseconds, or null. */
  query_start: string | null;
}

export interface StatusDocument {
  format_version: number;
  schema: string;
  blocked_keys: BlockedKeyStatus[];
  /** null when no other session of this database holds a snapshot or an xid. */
  xmin_holder: XminHolder | null;
  inbox: { consumers: InboxConsumerStatus[]; totals: InboxCounts };
  outbox: {
    pending: number;
    waiting: number;
    publishing: number;
    retryable: number;
    published: number;
    dead: number;
    discarded: number;
    oldest_unpublished_age_seconds: number;
  };
}

export interface StatusOptions {
  /** Default "boxcar". */
  schema?: string;
  /** Declared consumers: shown with zeros when they have no rows (`boxcar status` takes
   * them from its configuration's consumers). */
  consumers?: string[];
}

const kInboxStates = ['pending', 'processing', 'retryable', 'completed', 'waiting', 'dead'] as const;
const kOutboxStates = ['pending', 'waiting', 'publishing', 'retryable', 'published', 'dead'] as const;

function emptyCounts(): InboxCounts {
  return {
    pending: 0,
    processing: 0,
    retryable: 0,
    completed: 0,
    waiting: 0,
    dead: 0,
    discarded: 0,
    oldest_due_age_seconds: 0,
  };
}

/** Orders strings by their UTF-8 bytes, as the C++ std::map of consumers does. */
function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Counts every receipt and event by status in one read-only REPEATABLE READ snapshot and
 * returns the document `boxcar status --json` prints. Exact counts scan both tables: meant
 * for an operator on demand, not a scrape loop. Uses one pooled connection for one
 * transaction, with no session state (PgBouncer transaction pooling works).
 */
export async function status(pool: Pool, options: StatusOptions = {}): Promise<StatusDocument> {
  const schema = options.schema ?? 'boxcar';
  const inboxSql = withSchema(kInboxStatus, schema);
  const outboxSql = withSchema(kOutboxStatus, schema);
  const blockedSql = withSchema(kBlockedKeys, schema);
  const consumers = new Map<string, { declared: boolean; counts: InboxCounts; dueMs: number }>();
  for (const name of options.consumers ?? []) consumers.set(name, { declared: true, counts: emptyCounts(), dueMs: 0 });

  const client = guardClient(await pool.connect());
  let inboxRows: QueryResultRow[];
  let outboxRows: QueryResultRow[];
  let blockedRows: QueryResultRow[];
  let holderRows: QueryResultRow[];
  try {
    // One snapshot for both tables (and the blocked keys), so a message moving between
    // them is counted once.
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    inboxRows = (await client.query(inboxSql)).rows;
    outboxRows = (await client.query(outboxSql)).rows;
    blockedRows = (await client.query(blockedSql, [kBlockedKeysListed, BLOCKED_KEY_WAITING_CAP])).rows;
    holderRows = (await client.query(kXminHolder)).rows;
    await client.query('COMMIT');
    client.release();
  } catch (e) {
    client.release(true);
    throw e;
  }

  for (const row of inboxRows) {
    let entry = consumers.get(row.consumer);
    if (!entry) {
      entry = { declared: false, counts: emptyCounts(), dueMs: 0 };
      consumers.set(row.consumer, entry);
    }
    const state = String(row.status).toLowerCase();
    if ((kInboxStates as readonly string[]).includes(state)) {
      entry.counts[state as (typeof kInboxStates)[number]] += Number(row.live);
    }
    entry.counts.discarded += Number(row.discarded);
    entry.dueMs = Math.max(entry.dueMs, Number(row.oldest_due_age_ms));
  }
  const outbox = {
    pending: 0,
    waiting: 0,
    publishing: 0,
    retryable: 0,
    published: 0,
    dead: 0,
    discarded: 0,
    oldest_unpublished_age_seconds: 0,
  };
  let unpublishedMs = 0;
  for (const row of outboxRows) {
    const state = String(row.status).toLowerCase();
    if ((kOutboxStates as readonly string[]).includes(state)) {
      outbox[state as (typeof kOutboxStates)[number]] += Number(row.live);
    }
    outbox.discarded += Number(row.discarded);
    unpublishedMs = Math.max(unpublishedMs, Number(row.oldest_unpublished_age_ms));
  }
  outbox.oldest_unpublished_age_seconds = unpublishedMs / 1000;

  const list: InboxConsumerStatus[] = [];
  const totals = emptyCounts();
  let totalDueMs = 0;
  for (const name of [...consumers.keys()].sort(compareUtf8)) {
    const entry = consumers.get(name)!;
    list.push({ consumer: name, declared: entry.declared, ...entry.counts, oldest_due_age_seconds: entry.dueMs / 1000 });
    for (const state of kInboxStates) totals[state] += entry.counts[state];
    totals.discarded += entry.counts.discarded;
    totalDueMs = Math.max(totalDueMs, entry.dueMs);
  }
  totals.oldest_due_age_seconds = totalDueMs / 1000;

  const blocked: BlockedKeyStatus[] = blockedRows.map((row) => ({
    consumer: row.consumer,
    scope: scopeText(row.scope_kind, row.scope_id),
    key: row.ordering_key,
    receipt_id: Number(row.head_id),
    status: row.head_status,
    attempts: Number(row.head_attempts),
    error_type: row.head_error_type,
    error: row.head_error,
    waiting: Number(row.waiting),
    blocked_seconds: Number(row.blocked_ms) / 1000,
  }));

  const holder = holderRows[0];
  const xminHolder: XminHolder | null = holder
    ? {
        pid: Number(holder.pid),
        application_name: holder.application_name,
        user: holder.usename,
        database: holder.datname,
        state: holder.state,
        backend_type: holder.backend_type,
        xmin_age: Number(holder.xmin_age),
        // Whole milliseconds, as the C++ report keeps them.
        transaction_age_seconds: Math.trunc(Number(holder.xact_age_seconds) * 1000) / 1000,
        query_start:
          holder.query_start_us === null ? null : new Date(Math.floor(Number(holder.query_start_us) / 1000)).toISOString(),
      }
    : null;

  return {
    format_version: STATUS_FORMAT_VERSION,
    schema,
    blocked_keys: blocked,
    xmin_holder: xminHolder,
    inbox: { consumers: list, totals },
    outbox,
  };
}

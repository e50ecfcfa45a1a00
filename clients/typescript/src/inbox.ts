// Inbox: durable acceptance of incoming messages into Boxcar's inbox_receipts, the same
// rows, receipts and errors as the C++ boxcar::Inbox (inbox/include/boxcar/inbox/inbox.hpp).
// Processing stays in C++: a Boxcar worker claims what this client accepts, woken by the
// same NOTIFY channel.
//
// accept() resolves after its own write committed, so a transport may then acknowledge:
//
//   accepted   a new durable receipt exists: acknowledge
//   duplicate  the identity is already retained (any status, even DEAD): acknowledge
//   InboxStorageError (STORAGE_FAILURE / STORAGE_UNCERTAIN): do not acknowledge; redeliver
//   InboxValidationError, InboxConflictError (IDENTITY_CONFLICT): reject or dead-letter
import type { Pool, PoolClient, QueryResultRow } from 'pg';

import {
  AcceptRequest,
  AcceptRules,
  DEFAULT_MAX_STATEMENT_BYTES,
  MAX_STATEMENT_BYTES_CEILING,
  OrderingRule,
  PreparedRequest,
  checkTextField,
  defaultPayloadLimits,
  identityKey,
  prepareRequest,
} from './accept_request';
import { CanonicalLimits } from './canonical_json';
import { guardClient, toDatabaseFailure } from './database_errors';
import { InboxConflictError, InboxStorageError, InboxValidationError } from './errors';
import { Ride, WakeupNotifier } from './notifier';
import { kInsert, kInsertMany, kInsertManyRide, kInsertRide, kLookup, kLookupMany, withSchema } from './queries';

export type ReceiptStatus = 'PENDING' | 'PROCESSING' | 'RETRYABLE' | 'COMPLETED' | 'DEAD' | 'WAITING';

/** The durable receipt of a message identity. `id` is the receipt's bigint id as text. */
export interface Receipt {
  kind: 'accepted' | 'duplicate';
  id: string;
  status: ReceiptStatus;
}

/** One item's outcome in acceptMany(): a receipt, or that item's own error. */
export type AcceptResult =
  | { ok: true; receipt: Receipt }
  | { ok: false; error: InboxValidationError | InboxConflictError };

export interface InboxOptions {
  /** Schema holding inbox_receipts (default "boxcar"). */
  schema?: string;
  /** Consumers this module declares; accept() rejects any other. Required. */
  consumers: string[];
  /** Consumers whose receipts run in order per key: consumer -> rule. Every Inbox that
   * accepts for a consumer, in any language, needs the same rule (docs/ordering.md). */
  ordering?: Record<string, OrderingRule>;
  /** Payload limits: nesting depth (64) and canonical size (1 MiB). */
  payloadLimits?: Partial<CanonicalLimits>;
  /** Byte budget of one acceptMany statement (default 16 MiB, at most 32 MiB). */
  maxStatementBytes?: number;
  /** Wake idle C++ workers with NOTIFY after accepting (default true). */
  notify?: boolean;
}

// A deadlock with a concurrent batch, or a row purged between insert and lookup: run again.
const kMaxRounds = 3;
// SQLSTATE program_limit_exceeded: pg_notify on a full notification queue.
const kNotifyQueueFull = '54000';

class RetryBatch {}

function conflictError(p: PreparedRequest, existingId: string): InboxConflictError {
  return new InboxConflictError(
    existingId,
    `identity (${p.scopeKind}${p.scopeId === '' ? '' : `:${p.scopeId}`}, ${p.source}, ${p.consumer}, ${
      p.messageId
    }) is already retained as receipt ${existingId} with different content; the stored record is unchanged`,
  );
}

function storageError(error: unknown, doing: string, commitInFlight: boolean): InboxStorageError {
  const f = toDatabaseFailure(error, doing, commitInFlight);
  return new InboxStorageError(f.message, f.sqlstate, f.uncertain);
}

interface Stored {
  id: string;
  status: ReceiptStatus;
  /** The stored row's fingerprint, read by the lookup; "" for a row this batch inserted. */
  lookedUpFingerprint: string;
  inserted: boolean;
}

/** The statements of one acceptMany round: a transaction, or one autocommit statement. */
interface Statements {
  client: PoolClient;
  committing: boolean;
}

export class Inbox {
  private readonly pool: Pool;
  private readonly rules: AcceptRules;
  private readonly sql: {
    insert: string;
    insertRide: string;
    lookup: string;
    insertMany: string;
    insertManyRide: string;
    lookupMany: string;
  };
  private readonly channel: string;
  private readonly notifier: WakeupNotifier | null;

  /** The NOTIFY channel C++ workers LISTEN on for this schema. */
  static notifyChannel(schema: string): string {
    return `boxcar_inbox_${schema}`;
  }

  /** @throws TypeError for a bad option (no consumers, a bad consumer or schema name). Does
   * not touch the database. */
  constructor(pool: Pool, options: InboxOptions) {
    if (!pool) throw new TypeError('inbox.pool: a pg Pool is required');
    const schema = options.schema ?? 'boxcar';
    if (!options.consumers || options.consumers.length === 0) {
      throw new TypeError('consumers: declare at least one consumer this module accepts');
    }
    for (const consumer of options.consumers) {
      try {
        checkTextField(consumer, 'consumer', true);
      } catch (e) {
        throw new TypeError(`consumers: ${(e as Error).message}`);
      }
    }
    const consumers = new Set(options.consumers);
    const ordering = new Map(Object.entries(options.ordering ?? {}));
    for (const [consumer, rule] of ordering) {
      if (!consumers.has(consumer)) {
        throw new TypeError(`inbox.ordering.: '${consumer}' orders by key but is not among the declared consumers`);
      }
      if (rule.parkAfter !== undefined && !(Number.isInteger(rule.parkAfter) && rule.parkAfter >= 1)) {
        throw new TypeError(`inbox.ordering.: park_after needs at least 1 attempt, got ${rule.parkAfter}`);
      }
      if ('payloadPointer' in rule.key && !/^(\/([^~]|~[01])*)+$/.test(rule.key.payloadPointer)) {
        throw new TypeError(`inbox.ordering.: '${rule.key.payloadPointer}' is not a JSON Pointer naming a member`);
      }
      if ('metadataHeader' in rule.key && !rule.key.metadataHeader) {
        throw new TypeError('inbox.ordering.: a metadata header name must not be empty');
      }
    }
    const maxStatementBytes = options.maxStatementBytes ?? DEFAULT_MAX_STATEMENT_BYTES;
    if (!(Number.isInteger(maxStatementBytes) && maxStatementBytes >= 1 && maxStatementBytes <= MAX_STATEMENT_BYTES_CEILING)) {
      throw new TypeError(`inbox.max_statement_bytes: must be between 1 and ${MAX_STATEMENT_BYTES_CEILING}`);
    }
    this.pool = pool;
    this.rules = { consumers, payloadLimits: defaultPayloadLimits(options.payloadLimits), ordering, maxStatementBytes };
    this.sql = {
      insert: withSchema(kInsert, schema),
      insertRide: withSchema(kInsertRide, schema),
      lookup: withSchema(kLookup, schema),
      insertMany: withSchema(kInsertMany, schema),
      insertManyRide: withSchema(kInsertManyRide, schema),
      lookupMany: withSchema(kLookupMany, schema),
    };
    this.channel = Inbox.notifyChannel(schema);
    this.notifier = options.notify === false ? null : new WakeupNotifier(pool, this.channel);
  }

  /**
   * Checks `request` exactly as accept() and acceptMany() do before they touch the
   * database, and returns the values they would store; records nothing.
   * @throws InboxValidationError naming the offending field.
   */
  validate(request: AcceptRequest): PreparedRequest {
    return prepareRequest(request, this.rules);
  }

  /**
   * Durably records `request` in one autocommit statement and resolves after it committed:
   * - a new identity: { kind: 'accepted', id, status: 'PENDING' };
   * - the same identity and fingerprint: { kind: 'duplicate', id, status }, the stored row
   *   untouched (its status may be any, even DEAD);
   * @throws InboxValidationError before touching the database;
   * @throws InboxConflictError for the same identity with a different fingerprint;
   * @throws InboxStorageError when the database fails (uncertain: the write may have
   *   committed; redeliver the same identity and the inbox deduplicates).
   */
  async accept(request: AcceptRequest): Promise<Receipt> {
    const p = this.validate(request);
    let rides = true; // off after a NOTIFY failed on a full queue: the accept must not fail with it
    for (let round = 1; ; ++round) {
      let client: PoolClient;
      try {
        client = guardClient(await this.pool.connect());
      } catch (e) {
        throw storageError(e, 'accept', false);
      }
      const ride = rides && this.notifier ? this.notifier.beginRide([p.consumer]) : null;
      let inserted: QueryResultRow[];
      try {
        const params: unknown[] = [
          p.scopeKind,
          p.scopeId,
          p.source,
          p.consumer,
          p.messageId,
          p.eventType,
          p.schemaVersion,
          p.canonicalPayload,
          p.metadataJson,
          p.fingerprint,
          p.orderingKey,
          p.parkAfter,
        ];
        const result = ride
          ? await client.query(this.sql.insertRide, [...params, this.channel, ride.payloads])
          : await client.query(this.sql.insert, params);
        inserted = result.rows;
      } catch (e) {
        if (ride) this.notifier!.endRide(ride, 'failed', [p.consumer]);
        client.release(true);
        // The insert commits on its own: if the connection died under it, it may have landed.
        const failure = toDatabaseFailure(e, 'accept', true);
        if (ride && failure.sqlstate === kNotifyQueueFull && round < kMaxRounds) {
          rides = false;
          continue;
        }
        throw new InboxStorageError(failure.message, failure.sqlstate, failure.uncertain);
      }
      if (inserted.length > 0) {
        client.release();
        if (ride) this.notifier!.endRide(ride, 'carried', [p.consumer]);
        else this.notifier?.notify(p.consumer);
        return { kind: 'accepted', id: String(inserted[0].id), status: inserted[0].status };
      }
      if (ride) this.notifier!.endRide(ride, 'nothing-inserted', [p.consumer]);
      let existing: QueryResultRow[];
      try {
        existing = (
          await client.query(this.sql.lookup, [p.consumer, p.source, p.scopeKind, p.scopeId, p.messageId])
        ).rows;
        client.release();
      } catch (e) {
        client.release(true);
        throw storageError(e, 'accept', false);
      }
      if (existing.length === 0) {
        // Purged between our insert and lookup: the identity is free again.
        if (round < kMaxRounds) continue;
        throw new InboxStorageError('accept: identity kept vanishing between insert and lookup', '', false);
      }
      const id = String(existing[0].id);
      if (existing[0].fingerprint !== p.fingerprint) throw conflictError(p, id);
      return { kind: 'duplicate', id, status: existing[0].status };
    }
  }

  /**
   * Accepts a batch in one transaction (one autocommit statement when it fits one) and
   * returns one result per item, in input order. Identities repeated inside the batch
   * collapse onto one receipt (the first is accepted, repeats duplicate; a repeat with
   * other content is a conflict). An invalid or conflicting item does not affect the
   * others.
   * @throws InboxStorageError when the batch failed: then no item was recorded (or, if
   *   uncertain, all or none were).
   */
  async acceptMany(requests: readonly AcceptRequest[]): Promise<AcceptResult[]> {
    const results: (AcceptResult | undefined)[] = new Array(requests.length);
    const prepared: (PreparedRequest | null)[] = new Array(requests.length).fill(null);
    requests.forEach((request, i) => {
      try {
        prepared[i] = this.validate(request);
      } catch (e) {
        if (!(e instanceof InboxValidationError)) throw e;
        results[i] = { ok: false, error: e };
      }
    });
    const plan = planBatch(prepared, this.rules.maxStatementBytes);
    if (plan.leaders.length > 0) {
      const outcome = await this.recordBatch(prepared, plan);
      this.settle(prepared, plan, outcome, results);
    }
    return results as AcceptResult[];
  }

  /** Sends pending wake-ups and stops the notifier; the pool stays the caller's. */
  async close(): Promise<void> {
    await this.notifier?.close();
  }

  private async recordBatch(prepared: (PreparedRequest | null)[], plan: BatchPlan): Promise<BatchOutcome> {
    // Rows an earlier autocommit round inserted stay this batch's when a round runs again.
    const insertedEarlier = new Map<number, string>();
    let rides = this.notifier !== null;
    let previous: Map<number, Stored> | null = null;
    for (let round = 1; ; ++round) {
      if (previous) for (const [i, s] of previous) if (s.inserted) insertedEarlier.set(i, s.id);
      const stored = new Map<number, Stored>();
      previous = stored;
      const ride = rides && this.notifier ? this.notifier.beginRide(plan.consumers) : null;
      let rideQueued = false;
      let statements: Statements | null = null;
      try {
        const client = guardClient(await this.pool.connect());
        statements = { client, committing: false };
        if (plan.slices.length === 1) {
          // One statement is atomic on its own: autocommit saves BEGIN and COMMIT.
          rideQueued = await this.recordSlices(statements, prepared, plan, ride, stored, true);
        } else {
          await client.query('BEGIN');
          rideQueued = await this.recordSlices(statements, prepared, plan, ride, stored, false);
          statements.committing = true;
          await client.query('COMMIT');
        }
        client.release();
        for (const [i, s] of stored) if (insertedEarlier.get(i) === s.id) s.inserted = true;
        const carried = ride !== null && rideQueued;
        if (ride) this.notifier!.endRide(ride, carried ? 'carried' : 'nothing-inserted', plan.consumers);
        return { stored, wakeupCarried: carried };
      } catch (e) {
        if (ride) this.notifier!.endRide(ride, 'failed', plan.consumers);
        const committing = statements?.committing ?? false;
        if (statements) {
          if (e instanceof RetryBatch && plan.slices.length > 1) {
            try {
              await statements.client.query('ROLLBACK');
              statements.client.release();
            } catch {
              statements.client.release(true);
            }
          } else {
            statements.client.release(!(e instanceof RetryBatch));
          }
        }
        if (e instanceof RetryBatch) {
          if (round >= kMaxRounds) {
            // Autocommit: what the earlier rounds inserted stays, so the outcome is not known.
            throw new InboxStorageError(
              'accept_many: identities kept vanishing between insert and lookup',
              '',
              committing,
            );
          }
          continue;
        }
        const failure = toDatabaseFailure(e, 'accept_many', committing);
        // 40P01 deadlock / 40001 serialization: the batch rolled back whole; run it again.
        if (failure.sqlstate.startsWith('40') && !failure.uncertain && round < kMaxRounds) continue;
        if (ride && failure.sqlstate === kNotifyQueueFull && round < kMaxRounds) {
          rides = false;
          continue;
        }
        throw new InboxStorageError(failure.message, failure.sqlstate, failure.uncertain);
      }
    }
  }

  /** Runs every slice's insert (and lookup); true when a riding statement inserted a row. */
  private async recordSlices(
    statements: Statements,
    prepared: (PreparedRequest | null)[],
    plan: BatchPlan,
    ride: Ride | null,
    stored: Map<number, Stored>,
    autocommit: boolean,
  ): Promise<boolean> {
    let queued = false;
    for (const slice of plan.slices) {
      const columns = sliceColumns(slice, prepared);
      if (autocommit) statements.committing = true; // once it runs, the batch may be recorded
      const result = ride
        ? await statements.client.query(this.sql.insertManyRide, [...columns, this.channel, ride.payloads])
        : await statements.client.query(this.sql.insertMany, columns);
      if (result.rows.length > 0 && ride) queued = true;
      const byIdentity = new Map<string, number>();
      for (const i of slice) byIdentity.set(identityKey(prepared[i]!), i);
      for (const row of result.rows) {
        const i = byIdentity.get(
          identityKey({
            consumer: row.consumer,
            source: row.source,
            scopeKind: row.scope_kind,
            scopeId: row.scope_id,
            messageId: row.message_id,
          }),
        );
        if (i === undefined) throw new Error('accept_many: the insert returned an identity its statement did not carry');
        stored.set(i, { id: String(row.id), status: row.status, lookedUpFingerprint: '', inserted: true });
      }
      const unseen = slice.filter((i) => !stored.has(i));
      if (unseen.length === 0) continue;
      const keys: string[][] = [[], [], [], [], []];
      for (const i of unseen) {
        const p = prepared[i]!;
        keys[0].push(p.scopeKind);
        keys[1].push(p.scopeId);
        keys[2].push(p.source);
        keys[3].push(p.consumer);
        keys[4].push(p.messageId);
      }
      const found = await statements.client.query(this.sql.lookupMany, keys);
      for (const row of found.rows) {
        const i = unseen[Number(row.n) - 1];
        stored.set(i, { id: String(row.id), status: row.status, lookedUpFingerprint: row.fingerprint, inserted: false });
      }
      if (unseen.some((i) => !stored.has(i))) throw new RetryBatch(); // purged between insert and lookup
    }
    return queued;
  }

  private settle(
    prepared: (PreparedRequest | null)[],
    plan: BatchPlan,
    outcome: BatchOutcome,
    results: (AcceptResult | undefined)[],
  ): void {
    const notified = new Set<string>();
    prepared.forEach((p, i) => {
      if (results[i] !== undefined || p === null) return;
      const leader = plan.leaderOf[i];
      const s = outcome.stored.get(leader)!;
      const fingerprint = s.inserted ? prepared[leader]!.fingerprint : s.lookedUpFingerprint;
      if (fingerprint !== p.fingerprint) {
        results[i] = { ok: false, error: conflictError(p, s.id) };
        return;
      }
      const accepted = s.inserted && leader === i;
      results[i] = { ok: true, receipt: { kind: accepted ? 'accepted' : 'duplicate', id: s.id, status: s.status } };
      if (accepted && this.notifier && !outcome.wakeupCarried && !notified.has(p.consumer)) {
        notified.add(p.consumer);
        this.notifier.notify(p.consumer);
      }
    });
  }
}

interface BatchPlan {
  /** By input index of a valid item: its identity's leader (the first in input order). */
  leaderOf: number[];
  /** One per identity. */
  leaders: number[];
  /** The leaders in insertion order, cut into statements of at most maxStatementBytes. */
  slices: number[][];
  /** The consumers a riding wake-up names. */
  consumers: string[];
}

interface BatchOutcome {
  stored: Map<number, Stored>;
  wakeupCarried: boolean;
}

function compareIdentity(a: PreparedRequest, b: PreparedRequest): number {
  for (const [x, y] of [
    [a.consumer, b.consumer],
    [a.source, b.source],
    [a.scopeKind, b.scopeKind],
    [a.scopeId, b.scopeId],
    [a.messageId, b.messageId],
  ]) {
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/** The order a batch's leaders are inserted in, as in C++: by identity, so concurrent
 * batches take their locks in one order; the items of a consumer that orders by key last,
 * by (consumer, scope, key), each key's in input order, which becomes their order within
 * the key. (JavaScript compares UTF-16 units where C++ compares bytes: the two differ only
 * for characters from U+E000 against non-BMP ones, which at worst costs a deadlock retry.) */
function insertionOrder(order: number[], prepared: (PreparedRequest | null)[]): number[] {
  if (!order.some((i) => prepared[i]!.orderingKey !== null)) return order;
  return [...order].sort((a, b) => {
    const pa = prepared[a]!;
    const pb = prepared[b]!;
    const ka = pa.orderingKey !== null;
    const kb = pb.orderingKey !== null;
    if (ka !== kb) return ka ? 1 : -1;
    if (!ka) return 0;
    for (const [x, y] of [
      [pa.consumer, pb.consumer],
      [pa.scopeKind, pb.scopeKind],
      [pa.scopeId, pb.scopeId],
      [pa.orderingKey!, pb.orderingKey!],
    ]) {
      if (x !== y) return x < y ? -1 : 1;
    }
    return a - b;
  });
}

function planBatch(prepared: (PreparedRequest | null)[], maxStatementBytes: number): BatchPlan {
  const byIdentity: number[] = [];
  prepared.forEach((p, i) => {
    if (p !== null) byIdentity.push(i);
  });
  // Array.prototype.sort is stable: each identity's items stay in input order.
  byIdentity.sort((a, b) => compareIdentity(prepared[a]!, prepared[b]!));
  const leaderOf: number[] = new Array(prepared.length).fill(-1);
  const leaders: number[] = [];
  byIdentity.forEach((i, k) => {
    if (k > 0 && compareIdentity(prepared[byIdentity[k - 1]]!, prepared[i]!) === 0) {
      leaderOf[i] = leaderOf[byIdentity[k - 1]];
    } else {
      leaderOf[i] = i;
      leaders.push(i);
    }
  });
  const slices: number[][] = [];
  let sliceBytes = 0;
  for (const i of insertionOrder(leaders, prepared)) {
    const bytes = prepared[i]!.batchBytes;
    if (slices.length === 0 || sliceBytes + bytes > maxStatementBytes) {
      slices.push([]);
      sliceBytes = 0;
    }
    slices[slices.length - 1].push(i);
    sliceBytes += bytes;
  }
  const consumers: string[] = [];
  for (const i of leaders) if (!consumers.includes(prepared[i]!.consumer)) consumers.push(prepared[i]!.consumer);
  return { leaderOf, leaders, slices, consumers };
}

/** kInsertMany's $1..$12: one array per column (node-postgres writes the array literals),
 * payload and metadata as JSON arrays of their canonical texts. */
function sliceColumns(slice: number[], prepared: (PreparedRequest | null)[]): unknown[] {
  const text: string[][] = [[], [], [], [], [], []];
  const versions: number[] = [];
  const payloads: string[] = [];
  const metadata: string[] = [];
  const fingerprints: string[] = [];
  const keys: (string | null)[] = [];
  const parkAfter: (number | null)[] = [];
  for (const i of slice) {
    const p = prepared[i]!;
    text[0].push(p.scopeKind);
    text[1].push(p.scopeId);
    text[2].push(p.source);
    text[3].push(p.consumer);
    text[4].push(p.messageId);
    text[5].push(p.eventType);
    versions.push(p.schemaVersion);
    payloads.push(p.canonicalPayload);
    metadata.push(p.metadataJson);
    fingerprints.push(p.fingerprint);
    keys.push(p.orderingKey);
    parkAfter.push(p.parkAfter);
  }
  return [
    ...text,
    versions,
    `[${payloads.join(',')}]`,
    `[${metadata.join(',')}]`,
    fingerprints,
    keys,
    parkAfter,
  ];
}

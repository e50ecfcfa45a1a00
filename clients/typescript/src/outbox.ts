// OutboxEmitter: writes events into Boxcar's outbox_events inside the caller's own pg
// transaction, the same row the C++ OutboxEmitter writes (outbox/src/outbox_emitter.cpp):
// UUIDv7 event id, canonical payload, reserved headers, the Kafka record size limit, and
// the same errors. The C++ publisher (`boxcar publisher`) delivers committed events.
//
//   await client.query('BEGIN');
//   await client.query('INSERT INTO app.orders ...');
//   await outbox.emit(client, { eventType: 'order.created', schemaVersion: 1,
//                               topic: 'orders', payload: { orderId } },
//                     { scope: { kind: 'tenant', id: tenantId } });
//   await client.query('COMMIT');   // the event commits or rolls back with the order
import type { ClientBase, QueryResult } from 'pg';

import { CanonicalLimits, DEFAULT_CANONICAL_LIMITS, canonicalize, isWellFormed, utf8Length } from './canonical_json';
import { sqlstateOf } from './database_errors';
import { JsonValueError, OutboxPartitionMissingError, OutboxValidationError } from './errors';
import { kOutboxInsert, kOutboxInsertNotify, withSchema } from './queries';
import { Scope, scopeKindOf } from './scope';
import { uuidV7 } from './uuid';

/** An event described at run time (the C++ OutboxMessage). */
export interface OutboxMessage {
  eventType: string;
  schemaVersion: number;
  topic: string;
  payload: unknown;
}

export interface EmitOptions {
  /** The event's scope; a tenant scope needs its (authenticated) tenant id. Required. */
  scope: Scope;
  causationId?: string;
  correlationId?: string;
  /** Kafka record key. Default: the tenant id; for a global event, the event id. */
  key?: string;
  headers?: Record<string, string>;
  traceparent?: string;
  /** Whether the event keeps its place among the events of its (topic, key), in commit
   * order (docs/publisher.md, "Ordering"); only an explicit `key` takes part. Default true. */
  ordered?: boolean;
}

export interface OutboxOptions {
  /** Schema holding outbox_events (default "boxcar"). */
  schema?: string;
  payloadLimits?: Partial<CanonicalLimits>;
  /** Largest Kafka record an event may become: the producer's message.max.bytes
   * (default 1,000,000, librdkafka's). */
  maxRecordBytes?: number;
  /** When not empty, the only topics emit() accepts (outbox.topics). */
  topics?: string[];
  /** Wake idle C++ publishers with NOTIFY when the emitting transaction commits (default true). */
  notify?: boolean;
}

/** The stored event: `id` is the row's bigint id as text. */
export interface EmittedEvent {
  id: string;
  eventId: string;
}

/** The Kafka header names the publisher sets itself from the event's fields
 * (outbox/include/boxcar/outbox/reserved_headers.hpp). */
export const RESERVED_HEADERS: readonly string[] = Object.freeze([
  'event_id',
  'event_type',
  'schema_version',
  'tenant_scope',
  'tenant_id',
  'causation_id',
  'correlation_id',
  'traceparent',
]);

export const DEFAULT_MAX_RECORD_BYTES = 1_000_000;
// A record's framing beyond key, value and headers, and per header (record_size.hpp).
const kRecordOverheadBytes = 64;
const kHeaderOverheadBytes = 10;
const kMaxFieldBytes = 512;
// Kafka's own limit on topic names.
const kMaxTopicBytes = 249;
const kHeaderLimits: CanonicalLimits = { maxDepth: 2, maxBytes: 64 * 1024 };

function checkText(value: unknown, field: string, required: boolean, maxBytes = kMaxFieldBytes): void {
  if (value === undefined || value === null || value === '') {
    if (required) throw new OutboxValidationError('OUTBOX_FIELD_REQUIRED', field, 'must not be empty');
    return;
  }
  if (typeof value !== 'string') throw new OutboxValidationError('OUTBOX_FIELD_INVALID', field, 'must be a string');
  const bytes = utf8Length(value);
  if (bytes > maxBytes) {
    throw new OutboxValidationError('OUTBOX_FIELD_TOO_LONG', field, `is ${bytes} bytes; the limit is ${maxBytes}`);
  }
  if (!isWellFormed(value) || value.includes('\u0000')) {
    throw new OutboxValidationError('OUTBOX_FIELD_INVALID', field, 'must be valid UTF-8 without U+0000');
  }
}

function checkTopic(topic: unknown): void {
  checkText(topic, 'topic', true, kMaxTopicBytes);
  if (!/^[a-zA-Z0-9._-]+$/.test(topic as string)) {
    throw new OutboxValidationError(
      'OUTBOX_FIELD_INVALID',
      'topic',
      "Kafka topic names may contain only a-z, A-Z, 0-9, '.', '_' and '-'",
    );
  }
}

export class OutboxEmitter {
  private readonly insertSql: string;
  private readonly channel: string;
  private readonly notify: boolean;
  private readonly payloadLimits: CanonicalLimits;
  private readonly maxRecordBytes: number;
  private readonly topics: ReadonlySet<string>;

  /** The NOTIFY channel C++ publishers LISTEN on for this schema. */
  static notifyChannel(schema: string): string {
    return `boxcar_outbox_${schema}`;
  }

  /** @throws TypeError for a bad schema name, maxRecordBytes below 1 or a declared topic
   * Kafka would refuse. Does not touch the database. */
  constructor(options: OutboxOptions = {}) {
    const schema = options.schema ?? 'boxcar';
    this.maxRecordBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
    if (!(Number.isInteger(this.maxRecordBytes) && this.maxRecordBytes >= 1)) {
      throw new TypeError('kafka.message.max.bytes: maxRecordBytes must be at least 1');
    }
    for (const topic of options.topics ?? []) {
      try {
        checkTopic(topic);
      } catch (e) {
        throw new TypeError(`outbox.topics: declares '${topic}', which Kafka refuses: ${(e as Error).message}`);
      }
    }
    this.topics = new Set(options.topics ?? []);
    this.notify = options.notify !== false;
    this.insertSql = withSchema(this.notify ? kOutboxInsertNotify : kOutboxInsert, schema);
    this.channel = OutboxEmitter.notifyChannel(schema);
    this.payloadLimits = { ...DEFAULT_CANONICAL_LIMITS, ...options.payloadLimits };
  }

  /**
   * Writes `message` into the outbox on `client`, inside the transaction the caller began
   * there (emit never begins, commits or rolls back). The publishers' wake-up is sent when
   * that transaction commits, never after a rollback.
   * @throws OutboxValidationError before writing anything (OUTBOX_EVENT_TOO_LARGE, field
   *   "payload", when its Kafka record would exceed maxRecordBytes; OUTBOX_TOPIC_UNKNOWN,
   *   field "topic", for a topic outside `topics`);
   * @throws OutboxPartitionMissingError when no outbox partition covers the event id (the
   *   transaction is aborted: roll it back);
   *   any other database error as the query rejected it (the transaction is aborted).
   */
  async emit(client: ClientBase, message: OutboxMessage, options: EmitOptions): Promise<EmittedEvent> {
    const row = this.prepare(message, options);
    let result: QueryResult;
    try {
      result = await client.query(this.insertSql, this.notify ? [...row.params, this.channel] : row.params);
    } catch (e) {
      // check_violation: every CHECK of outbox_events is validated above, so what is left
      // is the partition routing (no partition covers the id).
      if (sqlstateOf(e) !== '23514') throw e;
      throw new OutboxPartitionMissingError(
        `no partition of outbox_events covers event id ${row.eventId} (emitted now by this host's clock): outbox ` +
          'partitions are created ahead by the janitor (retention.janitor) or `boxcar purge`; this transaction is ' +
          'aborted, roll it back and retry',
      );
    }
    return { id: String(result.rows[0].id), eventId: row.eventId };
  }

  /** Validates an event into its row; exported for the conformance tests through
   * prepareEvent(). */
  prepare(message: OutboxMessage, options: EmitOptions): { eventId: string; params: unknown[] } {
    if (message === null || typeof message !== 'object') {
      throw new OutboxValidationError('OUTBOX_FIELD_REQUIRED', 'event', 'must be an object');
    }
    checkText(message.eventType, 'event_type', true);
    const version = message.schemaVersion;
    if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > 2147483647) {
      throw new OutboxValidationError(
        'OUTBOX_SCHEMA_VERSION_INVALID',
        'schema_version',
        `must be an integer from 1 to 2147483647, got ${String(version)}`,
      );
    }
    checkTopic(message.topic);
    if (this.topics.size > 0 && !this.topics.has(message.topic)) {
      throw new OutboxValidationError(
        'OUTBOX_TOPIC_UNKNOWN',
        'topic',
        `'${message.topic}' is not a declared topic (outbox.topics: ${[...this.topics].sort().join(',')})`,
      );
    }
    const opts = options ?? ({} as EmitOptions);
    const kind = scopeKindOf(opts.scope);
    const scopeId = (opts.scope as unknown as { id?: unknown } | undefined)?.id;
    if (kind === 'tenant') {
      if (scopeId === undefined || scopeId === null || scopeId === '') {
        throw new OutboxValidationError(
          'OUTBOX_TENANT_SCOPE_INVALID',
          'scope.id',
          "a tenant event needs its tenant id; pass scope: context's scope, or { kind: 'global' } for an intentionally global event",
        );
      }
      checkText(scopeId, 'scope.id', true);
    } else if (kind === 'global') {
      if (scopeId !== undefined && scopeId !== null && scopeId !== '') {
        throw new OutboxValidationError('OUTBOX_TENANT_SCOPE_INVALID', 'scope.id', 'a global event carries no tenant id');
      }
    } else {
      throw new OutboxValidationError(
        'OUTBOX_TENANT_SCOPE_INVALID',
        'scope',
        "must be { kind: 'tenant', id } or { kind: 'global' }",
      );
    }
    checkText(opts.key, 'key', false);
    checkText(opts.causationId, 'causation_id', false);
    checkText(opts.correlationId, 'correlation_id', false);
    checkText(opts.traceparent, 'traceparent', false);

    let payload: string;
    try {
      payload = canonicalize(message.payload, this.payloadLimits);
    } catch (e) {
      if (e instanceof JsonValueError) throw new OutboxValidationError(e.code, `payload${e.path}`, e.message);
      throw e;
    }
    const headers = opts.headers ?? {};
    if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
      throw new OutboxValidationError('OUTBOX_FIELD_INVALID', 'headers', 'must be an object of strings');
    }
    // In the C++ std::map's order: names sorted by their bytes.
    const names = Object.keys(headers).sort(compareUtf8);
    for (const name of names) {
      if (RESERVED_HEADERS.includes(name)) {
        throw new OutboxValidationError(
          'OUTBOX_FIELD_INVALID',
          `headers/${name}`,
          'is a header the publisher sets itself; use the EmitOptions field',
        );
      }
      if (name === '') throw new OutboxValidationError('OUTBOX_FIELD_INVALID', 'headers', 'header names must not be empty');
      if (typeof headers[name] !== 'string') {
        throw new OutboxValidationError('OUTBOX_FIELD_INVALID', `headers/${name}`, 'must be a string');
      }
    }
    let headersJson: string;
    try {
      headersJson = canonicalize({ ...headers }, kHeaderLimits);
    } catch (e) {
      if (e instanceof JsonValueError) throw new OutboxValidationError(e.code, `headers${e.path}`, e.message);
      throw e;
    }

    const eventId = uuidV7();
    const tenantId = kind === 'tenant' ? (scopeId as string) : '';
    const explicitKey = opts.key ?? '';
    const key = explicitKey !== '' ? explicitKey : tenantId !== '' ? tenantId : eventId;
    // Only an explicit key orders: the default key (the tenant id) would serialise every
    // emitter of the tenant; a key that is the event's own id has nothing to wait for.
    const ordered = opts.ordered !== false && explicitKey !== '' && key !== eventId;
    this.checkRecordSize(message, opts, kind, tenantId, key, payload, eventId, names, headers);
    const params = [
      eventId,
      message.eventType,
      version,
      message.topic,
      key,
      kind,
      tenantId,
      opts.causationId ?? '',
      opts.correlationId ?? '',
      opts.traceparent ?? '',
      headersJson,
      payload,
      ordered,
    ];
    return { eventId, params };
  }

  // The record the publisher will build from this row: an event the producer refuses
  // (MSG_SIZE_TOO_LARGE) would only fail at every publish, so refuse it here.
  private checkRecordSize(
    message: OutboxMessage,
    opts: EmitOptions,
    kind: string,
    tenantId: string,
    key: string,
    payload: string,
    eventId: string,
    names: string[],
    headers: Record<string, string>,
  ): void {
    const payloadBytes = utf8Length(payload);
    let bytes = kRecordOverheadBytes + utf8Length(key) + payloadBytes;
    const header = (name: string, value: string) => {
      bytes += kHeaderOverheadBytes + utf8Length(name) + utf8Length(value);
    };
    for (const name of names) header(name, headers[name]);
    header('event_id', eventId);
    header('event_type', message.eventType);
    header('schema_version', String(message.schemaVersion));
    header('tenant_scope', kind);
    for (const [name, value] of [
      ['tenant_id', tenantId],
      ['causation_id', opts.causationId ?? ''],
      ['correlation_id', opts.correlationId ?? ''],
      ['traceparent', opts.traceparent ?? ''],
    ]) {
      if (value !== '') header(name, value);
    }
    if (bytes > this.maxRecordBytes) {
      throw new OutboxValidationError(
        'OUTBOX_EVENT_TOO_LARGE',
        'payload',
        `the Kafka record would be ${bytes} bytes (payload ${payloadBytes}, key and headers); the limit is ${this.maxRecordBytes} (maxRecordBytes, the producer's message.max.bytes)`,
      );
    }
  }
}

/** Orders strings by their UTF-8 bytes (std::string's order). */
function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

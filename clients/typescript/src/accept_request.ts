// The accept request, and its validation into the exact values stored and compared: the
// same checks, in the same order, with the same codes and fields as the C++
// prepare_request (inbox/src/prepared_request.cpp), so the first error reported for a
// request is the same in both languages (conformance/accept_requests.json).
import {
  CanonicalLimits,
  DEFAULT_CANONICAL_LIMITS,
  canonicalize,
  contentFingerprint,
  formatEsNumber,
  isWellFormed,
  utf8Length,
} from './canonical_json';
import { InboxValidationError, JsonValueError } from './errors';
import { Scope, scopeKindOf } from './scope';

/** Tracing and correlation data carried with a message. Not fingerprinted: a redelivery
 * with other trace headers is still a duplicate. */
export interface Metadata {
  traceparent?: string;
  tracestate?: string;
  correlationId?: string;
  causationId?: string;
  headers?: Record<string, string>;
}

export interface AcceptRequest {
  /** Identity: scope + source + consumer + messageId. Stable across redeliveries. */
  scope: Scope;
  source: string;
  consumer: string;
  messageId: string;
  /** Content: fingerprinted together with the payload. */
  eventType: string;
  schemaVersion: number;
  payload: unknown;
  metadata?: Metadata;
}

/** Where a consumer's ordering key comes from (docs/ordering.md). */
export type OrderingKeySource = { metadataHeader: string } | { payloadPointer: string };

export interface OrderingRule {
  key: OrderingKeySource;
  /** Absent: block (the C++ HeadOfLine::block()); a number: HeadOfLine::park_after(n). */
  parkAfter?: number;
}

/** Longest identity component (source, consumer, message id, scope id, event type, key),
 * in UTF-8 bytes: the table's CHECK constraints. */
export const MAX_IDENTITY_BYTES = 512;
/** The default and the largest InboxOptions.maxStatementBytes, as in C++. */
export const DEFAULT_MAX_STATEMENT_BYTES = 16 * 1024 * 1024;
export const MAX_STATEMENT_BYTES_CEILING = 32 * 1024 * 1024;

// Metadata is small routing data, not a second payload.
const kMetadataLimits: CanonicalLimits = { maxDepth: 3, maxBytes: 64 * 1024 };

/** The columns a request is stored as. */
export interface PreparedRequest {
  scopeKind: 'tenant' | 'global';
  scopeId: string;
  source: string;
  consumer: string;
  messageId: string;
  eventType: string;
  schemaVersion: number;
  canonicalPayload: string;
  metadataJson: string;
  fingerprint: string;
  orderingKey: string | null;
  parkAfter: number | null;
  /** What the item adds to acceptMany's column arrays (batchItemBytes). */
  batchBytes: number;
}

export interface AcceptRules {
  consumers: ReadonlySet<string>;
  payloadLimits: CanonicalLimits;
  ordering: ReadonlyMap<string, OrderingRule>;
  maxStatementBytes: number;
}

/** Checks one identity-like text field: required, at most 512 UTF-8 bytes, well-formed,
 * without U+0000. */
export function checkTextField(value: unknown, field: string, required: boolean): void {
  if (value === undefined || value === null || value === '') {
    if (required) throw new InboxValidationError('INBOX_FIELD_REQUIRED', field, 'must not be empty');
    return;
  }
  if (typeof value !== 'string') throw new InboxValidationError('INBOX_FIELD_INVALID', field, 'must be a string');
  // An unpaired surrogate counts three bytes here, as the U+FFFD it would become.
  const bytes = utf8Length(value);
  if (bytes > MAX_IDENTITY_BYTES) {
    throw new InboxValidationError(
      'INBOX_FIELD_TOO_LONG',
      field,
      `is ${bytes} bytes; the limit is ${MAX_IDENTITY_BYTES}`,
    );
  }
  if (!isWellFormed(value)) throw new InboxValidationError('INBOX_FIELD_INVALID', field, 'is not valid UTF-8');
  if (value.includes('\u0000')) throw new InboxValidationError('INBOX_FIELD_INVALID', field, 'contains U+0000');
}

function metadataJson(metadata: Metadata | undefined): string {
  const object: Record<string, unknown> = {};
  if (metadata !== undefined && metadata !== null) {
    if (typeof metadata !== 'object') {
      throw new InboxValidationError('INBOX_FIELD_INVALID', 'metadata', 'must be an object');
    }
    for (const [name, key] of [
      ['traceparent', 'traceparent'],
      ['tracestate', 'tracestate'],
      ['correlationId', 'correlationId'],
      ['causationId', 'causationId'],
    ] as const) {
      const value = metadata[key];
      if (value === undefined || value === null || value === '') continue;
      if (typeof value !== 'string') {
        throw new InboxValidationError('INBOX_FIELD_INVALID', `metadata/${name}`, 'must be a string');
      }
      object[name] = value;
    }
    const headers = metadata.headers;
    if (headers !== undefined && headers !== null) {
      if (typeof headers !== 'object' || Array.isArray(headers)) {
        throw new InboxValidationError('INBOX_FIELD_INVALID', 'metadata/headers', 'must be an object of strings');
      }
      for (const [name, value] of Object.entries(headers)) {
        if (typeof value !== 'string') {
          throw new InboxValidationError('INBOX_FIELD_INVALID', `metadata.headers/${name}`, 'must be a string');
        }
      }
      if (Object.keys(headers).length > 0) object.headers = { ...headers };
    }
  }
  try {
    return canonicalize(object, kMetadataLimits);
  } catch (e) {
    if (e instanceof JsonValueError) throw new InboxValidationError(e.code, `metadata${e.path}`, e.message);
    throw e;
  }
}

/** The bytes a text element adds to a PostgreSQL array literal: quoted, `"` and `\`
 * escaped, with a separator (the C++ PgArrayBuilder::element_bytes). */
function elementBytes(value: string): number {
  let escapes = 0;
  for (let i = 0; i < value.length; ++i) {
    const c = value.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) ++escapes;
  }
  return utf8Length(value) + 3 + escapes;
}

// The schema version's and park_after's elements and the twelve arrays' brackets: one item
// alone is a whole statement by this measure (C++ kItemFixedBytes).
const kItemFixedBytes = 11 + 11 + 12 * 2;

/** The bytes `p` adds to acceptMany's column arrays; an item over the statement budget by
 * this measure never fits (INBOX_ITEM_TOO_LARGE). */
export function batchItemBytes(p: PreparedRequest): number {
  let bytes = kItemFixedBytes;
  for (const field of [p.scopeKind, p.scopeId, p.source, p.consumer, p.messageId, p.eventType, p.fingerprint]) {
    bytes += elementBytes(field);
  }
  bytes += utf8Length(p.canonicalPayload) + 1 + utf8Length(p.metadataJson) + 1;
  bytes += p.orderingKey !== null ? elementBytes(p.orderingKey) : 5;
  return bytes;
}

/** Resolves an RFC 6901 pointer in `document`; undefined when it names nothing (nlohmann's
 * contains()). */
function resolvePointer(document: unknown, pointer: string): unknown {
  let node: unknown = document;
  for (const raw of pointer.split('/').slice(1)) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      const index = Number(token);
      if (index >= node.length) return undefined;
      node = node[index];
    } else if (node !== null && typeof node === 'object') {
      if (!Object.prototype.hasOwnProperty.call(node, token)) return undefined;
      node = (node as Record<string, unknown>)[token];
    } else {
      return undefined;
    }
  }
  return node;
}

/** The field accept() names for an ordering key's errors. */
export function orderingKeyField(source: OrderingKeySource): string {
  return 'payloadPointer' in source ? `payload${source.payloadPointer}` : `metadata.headers/${source.metadataHeader}`;
}

function orderingKeyOf(rule: OrderingRule, request: AcceptRequest): string {
  const field = orderingKeyField(rule.key);
  let key: string;
  if ('payloadPointer' in rule.key) {
    const value = resolvePointer(request.payload, rule.key.payloadPointer);
    if (value === undefined) {
      throw new InboxValidationError(
        'INBOX_ORDERING_KEY_MISSING',
        field,
        'the consumer orders by this value, and the payload has none',
      );
    }
    if (typeof value === 'string') {
      key = value;
    } else if (typeof value === 'number' && Number.isSafeInteger(value)) {
      // An integer's canonical text, as in C++ (the number rule keeps keys within 2^53 − 1).
      key = formatEsNumber(value);
    } else {
      throw new InboxValidationError(
        'INBOX_ORDERING_KEY_INVALID',
        field,
        `an ordering key is a string or an integer, not ${value === null ? 'null' : typeof value}`,
      );
    }
  } else {
    const headers = request.metadata?.headers;
    const value =
      headers && Object.prototype.hasOwnProperty.call(headers, rule.key.metadataHeader)
        ? headers[rule.key.metadataHeader]
        : undefined;
    if (value === undefined) {
      throw new InboxValidationError(
        'INBOX_ORDERING_KEY_MISSING',
        field,
        'the consumer orders by this header, and the message has none',
      );
    }
    key = value;
  }
  checkTextField(key, field, true);
  return key;
}

/**
 * Validates `request` into the values accept() stores.
 * @throws InboxValidationError naming the offending field, the first one the C++ library
 *   names for the same request.
 */
export function prepareRequest(request: AcceptRequest, rules: AcceptRules): PreparedRequest {
  if (request === null || typeof request !== 'object') {
    throw new InboxValidationError('INBOX_FIELD_REQUIRED', 'request', 'must be an object');
  }
  const scope = request.scope;
  const kind = scopeKindOf(scope);
  if (kind === 'tenant') {
    const id = (scope as unknown as { id?: unknown }).id;
    if (id === undefined || id === null || id === '') {
      throw new InboxValidationError(
        'INBOX_SCOPE_INVALID',
        'scope.id',
        "a tenant scope needs the verified tenant id; use { kind: 'global' } for intentionally global messages",
      );
    }
    checkTextField(id, 'scope.id', true);
  } else if (kind === 'global') {
    const id = (scope as unknown as { id?: unknown }).id;
    if (id !== undefined && id !== null && id !== '') {
      throw new InboxValidationError('INBOX_SCOPE_INVALID', 'scope.id', 'a global scope carries no tenant id');
    }
  } else {
    throw new InboxValidationError(
      'INBOX_SCOPE_INVALID',
      'scope',
      "must be { kind: 'tenant', id } or { kind: 'global' }",
    );
  }
  checkTextField(request.source, 'source', true);
  checkTextField(request.consumer, 'consumer', true);
  checkTextField(request.messageId, 'message_id', true);
  checkTextField(request.eventType, 'event_type', true);
  if (!rules.consumers.has(request.consumer)) {
    throw new InboxValidationError(
      'INBOX_UNKNOWN_CONSUMER',
      'consumer',
      `'${request.consumer}' is not among the consumers this inbox declares`,
    );
  }
  const version = request.schemaVersion;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > 2147483647) {
    throw new InboxValidationError(
      'INBOX_SCHEMA_VERSION_INVALID',
      'schema_version',
      `must be an integer from 1 to 2147483647, got ${String(version)}`,
    );
  }

  let canonicalPayload: string;
  try {
    canonicalPayload = canonicalize(request.payload, rules.payloadLimits);
  } catch (e) {
    if (e instanceof JsonValueError) throw new InboxValidationError(e.code, `payload${e.path}`, e.message);
    throw e;
  }
  const metadata = metadataJson(request.metadata);
  const prepared: PreparedRequest = {
    scopeKind: kind,
    scopeId: kind === 'tenant' ? (scope as unknown as { id: string }).id : '',
    source: request.source,
    consumer: request.consumer,
    messageId: request.messageId,
    eventType: request.eventType,
    schemaVersion: version,
    canonicalPayload,
    metadataJson: metadata,
    fingerprint: contentFingerprint(request.eventType, version, canonicalPayload),
    orderingKey: null,
    parkAfter: null,
    batchBytes: 0,
  };
  const rule = rules.ordering.get(request.consumer);
  if (rule !== undefined) {
    prepared.orderingKey = orderingKeyOf(rule, request);
    prepared.parkAfter = rule.parkAfter ?? null;
  }
  // A batch is split into statements of at most maxStatementBytes; an item over it alone
  // would fail the same way on every redelivery, so it is invalid, not a storage error.
  prepared.batchBytes = batchItemBytes(prepared);
  if (prepared.batchBytes > rules.maxStatementBytes) {
    throw new InboxValidationError(
      'INBOX_ITEM_TOO_LARGE',
      'payload',
      `the item is ${prepared.batchBytes} bytes as stored (payload, metadata and identity); the limit per statement is ${rules.maxStatementBytes} (maxStatementBytes)`,
    );
  }
  return prepared;
}

/** The identity as one string, for grouping repeats inside a batch (U+0000 cannot occur in
 * a validated field, so it separates them). */
export function identityKey(p: {
  consumer: string;
  source: string;
  scopeKind: string;
  scopeId: string;
  messageId: string;
}): string {
  return `${p.consumer}\u0000${p.source}\u0000${p.scopeKind}\u0000${p.scopeId}\u0000${p.messageId}\u0000`;
}

export function defaultPayloadLimits(limits?: Partial<CanonicalLimits>): CanonicalLimits {
  return { ...DEFAULT_CANONICAL_LIMITS, ...limits };
}

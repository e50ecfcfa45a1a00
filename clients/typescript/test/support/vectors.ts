// The shared conformance vectors (conformance/*.json at the repository root), as the C++
// tests read them, and their requests in this client's shapes.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

import type { AcceptRequest, EmitOptions, InboxOptions, OrderingRule, OutboxMessage, Scope } from '../../src';

/** BOXCAR_CONFORMANCE_DIR, else the repository's conformance/ (this file is
 * clients/typescript/build/test/support/vectors.js once compiled). */
export const conformanceDir =
  process.env.BOXCAR_CONFORMANCE_DIR ?? path.resolve(__dirname, '..', '..', '..', '..', '..', 'conformance');

// The vector files are plain JSON; their shapes are described where they are read.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export function load(file: string): Json {
  return JSON.parse(readFileSync(path.join(conformanceDir, file), 'utf8'));
}

/** A canonical-JSON case's input: "text", or "textHex" for bytes that are not UTF-8. */
export function caseText(c: Json): string | Uint8Array {
  return c.text !== undefined ? c.text : new Uint8Array(Buffer.from(c.textHex, 'hex'));
}

/** A vector's request; its payload parsed by JSON.parse, as an application's would be. */
export function requestFromJson(j: Json): AcceptRequest {
  return {
    scope: j.scope as Scope,
    source: j.source,
    consumer: j.consumer,
    messageId: j.messageId,
    eventType: j.eventType,
    schemaVersion: j.schemaVersion,
    payload: JSON.parse(j.payloadText),
    metadata: j.metadata,
  };
}

export function inboxOptionsFromJson(j: Json, schema: string): InboxOptions {
  const ordering: Record<string, OrderingRule> = {};
  for (const [consumer, rule] of Object.entries<Json>(j.ordering)) {
    ordering[consumer] = { key: rule.key, ...(rule.parkAfter !== undefined ? { parkAfter: rule.parkAfter } : {}) };
  }
  return {
    schema,
    consumers: j.consumers,
    ordering,
    payloadLimits: j.payloadLimits,
    maxStatementBytes: j.maxStatementBytes,
    notify: false,
  };
}

export function eventFromJson(j: Json): OutboxMessage {
  return { eventType: j.eventType, schemaVersion: j.schemaVersion, topic: j.topic, payload: JSON.parse(j.payloadText) };
}

export function emitOptionsFromJson(j: Json): EmitOptions {
  return {
    scope: j.scope as Scope,
    key: j.key,
    causationId: j.causationId,
    correlationId: j.correlationId,
    traceparent: j.traceparent,
    headers: j.headers,
    ordered: j.ordered,
  };
}

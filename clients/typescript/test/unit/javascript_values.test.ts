// JavaScript values that JSON text cannot express, so no shared vector carries them: the
// client refuses each with a typed error at its path, never by dropping or coercing it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Pool } from 'pg';

import {
  AcceptRequest,
  Inbox,
  InboxValidationError,
  JsonValueError,
  OutboxEmitter,
  OutboxValidationError,
  canonicalize,
  contentFingerprint,
  isUuidV7,
  uuidV7,
} from '../../src';
import { kCircularRule, kClassInstancesRule, kUndefinedRule } from '../support/javascript_rules';

function refusal(value: unknown): { code: string; path: string } {
  try {
    canonicalize(value);
  } catch (e) {
    assert.ok(e instanceof JsonValueError, String(e));
    return { code: e.code, path: e.path };
  }
  assert.fail(`${String(value)} was canonicalised`);
}

test(kUndefinedRule, () => {
  assert.deepEqual(refusal(undefined), { code: 'JSON_UNSUPPORTED_VALUE', path: '' });
  assert.deepEqual(refusal({ a: 1, b: undefined }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/b' });
  assert.deepEqual(refusal({ a: [1, undefined] }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/a/1' });
  // eslint-disable-next-line no-sparse-arrays
  assert.deepEqual(refusal({ a: [1, , 3] }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/a/1' });
});

test(kClassInstancesRule, () => {
  class Order {
    constructor(readonly id: string) {}
  }
  assert.deepEqual(refusal({ at: new Date(0) }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/at' });
  assert.deepEqual(refusal({ m: new Map([['a', 1]]) }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/m' });
  assert.deepEqual(refusal([new Order('o-1')]), { code: 'JSON_UNSUPPORTED_VALUE', path: '/0' });
  assert.deepEqual(refusal({ b: Buffer.from('x') }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/b' });
  // A plain object without a prototype is plain JSON.
  const bare = Object.create(null) as Record<string, unknown>;
  bare.b = 1;
  bare.a = 2;
  assert.equal(canonicalize(bare), '{"a":2,"b":1}');
});

test(kCircularRule, () => {
  const a: Record<string, unknown> = { x: 1 };
  a.self = a;
  assert.deepEqual(refusal(a), { code: 'JSON_UNSUPPORTED_VALUE', path: '/self' });
  const list: unknown[] = [1];
  list.push({ back: list });
  assert.deepEqual(refusal(list), { code: 'JSON_UNSUPPORTED_VALUE', path: '/1/back' });
  // The same object twice, not nested in itself, is not circular.
  const shared = { k: 1 };
  assert.equal(canonicalize({ a: shared, b: shared }), '{"a":{"k":1},"b":{"k":1}}');
});

test('non-finite numbers, bigints, functions and symbols are refused at their paths', () => {
  assert.deepEqual(refusal({ n: NaN }), { code: 'JSON_NON_FINITE_NUMBER', path: '/n' });
  assert.deepEqual(refusal([Infinity]), { code: 'JSON_NON_FINITE_NUMBER', path: '/0' });
  assert.deepEqual(refusal({ a: { b: -Infinity } }), { code: 'JSON_NON_FINITE_NUMBER', path: '/a/b' });
  assert.deepEqual(refusal({ big: 10n }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/big' });
  assert.deepEqual(refusal({ f: () => 1 }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/f' });
  assert.deepEqual(refusal({ s: Symbol('x') }), { code: 'JSON_UNSUPPORTED_VALUE', path: '/s' });
  assert.deepEqual(refusal({ [Symbol('k')]: 1 }), { code: 'JSON_UNSUPPORTED_VALUE', path: '' });
});

test('a string or member name with an unpaired surrogate is not UTF-8', () => {
  assert.deepEqual(refusal({ a: 'x\ud800' }), { code: 'JSON_INVALID_UTF8', path: '/a' });
  assert.deepEqual(refusal({ a: { ['\udc00']: 1 } }), { code: 'JSON_INVALID_UTF8', path: '/a' });
  assert.equal(canonicalize({ e: '\ud83d\ude00' }), '{"e":"\ud83d\ude00"}');
});

test('numbers follow the C++ rule: the value decides, -0 prints as 0', () => {
  assert.equal(canonicalize([-0, 1.5, 1e21, 9007199254740991, 1e-7]), '[0,1.5,1e+21,9007199254740991,1e-7]');
  assert.deepEqual(refusal({ n: 2 ** 53 }), { code: 'JSON_INTEGER_OUT_OF_RANGE', path: '/n' });
  assert.deepEqual(refusal([1e17]), { code: 'JSON_INTEGER_OUT_OF_RANGE', path: '/0' });
  assert.deepEqual(refusal(-9007199254740992), { code: 'JSON_INTEGER_OUT_OF_RANGE', path: '' });
});

test('the fingerprint of a JavaScript payload does not depend on its key order', () => {
  const a = contentFingerprint('order.created', 1, canonicalize({ orderId: 'o-1', total: 12.5 }));
  const b = contentFingerprint('order.created', 1, canonicalize({ total: 12.5, orderId: 'o-1' }));
  assert.equal(a, b);
  assert.notEqual(a, contentFingerprint('order.created', 1, canonicalize({ total: 12.5, orderId: 'o-2' })));
});

const request: AcceptRequest = {
  scope: { kind: 'tenant', id: 'tenant-7' },
  source: 'orders-service',
  consumer: 'orders.projection.v1',
  messageId: 'evt-1',
  eventType: 'order.created',
  schemaVersion: 1,
  payload: { orderId: 'o-1' },
};

function rejection(change: Partial<Record<keyof AcceptRequest, unknown>>): { code: string; field: string } {
  const inbox = new Inbox({} as Pool, { consumers: ['orders.projection.v1'], notify: false });
  try {
    inbox.validate({ ...request, ...change } as AcceptRequest);
  } catch (e) {
    assert.ok(e instanceof InboxValidationError, String(e));
    return { code: e.code, field: e.field };
  }
  assert.fail('the request was valid');
}

test('request fields that are not what JSON vectors can express are refused naming the field', () => {
  assert.deepEqual(rejection({ source: 42 }), { code: 'INBOX_FIELD_INVALID', field: 'source' });
  assert.deepEqual(rejection({ messageId: undefined }), { code: 'INBOX_FIELD_REQUIRED', field: 'message_id' });
  assert.deepEqual(rejection({ messageId: 'a\ud800' }), { code: 'INBOX_FIELD_INVALID', field: 'message_id' });
  assert.deepEqual(rejection({ schemaVersion: 1.5 }), {
    code: 'INBOX_SCHEMA_VERSION_INVALID',
    field: 'schema_version',
  });
  assert.deepEqual(rejection({ schemaVersion: 2 ** 31 }), {
    code: 'INBOX_SCHEMA_VERSION_INVALID',
    field: 'schema_version',
  });
  assert.deepEqual(rejection({ scope: { kind: 'team', id: 'x' } }), { code: 'INBOX_SCOPE_INVALID', field: 'scope' });
  assert.deepEqual(rejection({ scope: undefined }), { code: 'INBOX_SCOPE_INVALID', field: 'scope' });
  assert.deepEqual(rejection({ payload: { when: new Date(0) } }), {
    code: 'JSON_UNSUPPORTED_VALUE',
    field: 'payload/when',
  });
  assert.deepEqual(rejection({ metadata: { headers: { retry: 3 } } }), {
    code: 'INBOX_FIELD_INVALID',
    field: 'metadata.headers/retry',
  });
  assert.deepEqual(rejection({ metadata: { correlationId: 7 } }), {
    code: 'INBOX_FIELD_INVALID',
    field: 'metadata/correlationId',
  });
});

test('an integer ordering key of a JavaScript payload is its canonical text', () => {
  const inbox = new Inbox({} as Pool, {
    consumers: ['orders.v1'],
    ordering: { 'orders.v1': { key: { payloadPointer: '/order/id' } } },
    notify: false,
  });
  const keyOf = (id: unknown) =>
    inbox.validate({ ...request, consumer: 'orders.v1', payload: { order: { id } } }).orderingKey;
  assert.equal(keyOf(42), '42');
  assert.equal(keyOf(5.0), '5');
  assert.equal(keyOf(-0), '0');
  assert.equal(keyOf('o-1'), 'o-1');
  assert.throws(() => keyOf(1.5), (e: unknown) => e instanceof InboxValidationError && e.code === 'INBOX_ORDERING_KEY_INVALID');
});

test('emit refuses JavaScript values and malformed options before writing anything', async () => {
  const outbox = new OutboxEmitter({ notify: false });
  const neverUsed = {
    query: () => {
      throw new Error('emit wrote although the event was invalid');
    },
  } as never;
  const event = { eventType: 'order.projected', schemaVersion: 1, topic: 'orders.projected', payload: { a: 1 } };
  const refusedWith = async (e: unknown, options: unknown, code: string, field: string) => {
    await assert.rejects(
      outbox.emit(neverUsed, e as never, options as never),
      (err: unknown) => err instanceof OutboxValidationError && err.code === code && err.field === field,
    );
  };
  await refusedWith({ ...event, payload: { a: undefined } }, { scope: { kind: 'global' } }, 'JSON_UNSUPPORTED_VALUE', 'payload/a');
  await refusedWith(event, {}, 'OUTBOX_TENANT_SCOPE_INVALID', 'scope');
  await refusedWith(event, { scope: { kind: 'global' }, headers: { n: 1 } }, 'OUTBOX_FIELD_INVALID', 'headers/n');
  await refusedWith({ ...event, schemaVersion: '1' }, { scope: { kind: 'global' } }, 'OUTBOX_SCHEMA_VERSION_INVALID', 'schema_version');
});

test('event ids are UUIDv7 in creation order within the process', () => {
  const ids = Array.from({ length: 5000 }, () => uuidV7());
  for (const id of ids) assert.ok(isUuidV7(id), id);
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(ids).size, ids.length);
  const ms = parseInt(ids[0].replace(/-/g, '').slice(0, 12), 16);
  assert.ok(Math.abs(ms - Date.now()) < 60_000);
});

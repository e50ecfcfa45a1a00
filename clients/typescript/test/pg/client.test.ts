// The client against a real PostgreSQL migrated by the C++ library: least-privilege roles,
// wake-ups on the C++ channels, status() equal to `boxcar status --json`, batches of
// several statements, and concurrent accepts of one identity.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

import { Client, Pool } from 'pg';

import { AcceptRequest, Inbox, InboxConflictError, OutboxEmitter, StatusDocument, status } from '../../src';
import { TestSchema } from '../support/database';

const consumer = 'orders.projection.v1';

function request(id: string, payload: unknown = { orderId: id }): AcceptRequest {
  return {
    scope: { kind: 'tenant', id: 'tenant-7' },
    source: 'orders-service',
    consumer,
    messageId: id,
    eventType: 'order.created',
    schemaVersion: 1,
    payload,
  };
}

test('as the least-privilege ingress role the client accepts, deduplicates and refuses a conflict; it cannot emit', async () => {
  const db = new TestSchema({ roles: true });
  try {
    const ingress = new Pool({ connectionString: await db.loginAs('ingress'), max: 2 });
    const inbox = new Inbox(ingress, { schema: db.schema, consumers: [consumer] });
    assert.equal((await inbox.accept(request('m-1'))).kind, 'accepted');
    assert.equal((await inbox.accept(request('m-1', { orderId: 'm-1' }))).kind, 'duplicate');
    await assert.rejects(inbox.accept(request('m-1', { orderId: 'other' })), InboxConflictError);
    const batch = await inbox.acceptMany([request('m-2'), request('m-1'), request('m-2')]);
    assert.deepEqual(
      batch.map((r) => (r.ok ? r.receipt.kind : r.error.code)),
      ['accepted', 'duplicate', 'duplicate'],
    );
    // The ingress may not write the outbox (docs/security.md): a compromised ingress cannot forge events.
    const client = await ingress.connect();
    try {
      await client.query('BEGIN');
      await assert.rejects(
        new OutboxEmitter({ schema: db.schema }).emit(
          client,
          { eventType: 'e', schemaVersion: 1, topic: 't', payload: {} },
          { scope: { kind: 'global' } },
        ),
        (e: { code?: string }) => e.code === '42501',
      );
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    await inbox.close();
    await ingress.end();

    // The worker role emits; the operator role reads status.
    const worker = new Pool({ connectionString: await db.loginAs('worker'), max: 1 });
    const wc = await worker.connect();
    await wc.query('BEGIN');
    await new OutboxEmitter({ schema: db.schema }).emit(
      wc,
      { eventType: 'order.projected', schemaVersion: 1, topic: 'orders.projected', payload: { orderId: 'm-1' } },
      { scope: { kind: 'tenant', id: 'tenant-7' } },
    );
    await wc.query('COMMIT');
    wc.release();
    await worker.end();
    const operator = new Pool({ connectionString: await db.loginAs('operator'), max: 1 });
    const report = await status(operator, { schema: db.schema, consumers: [consumer] });
    assert.equal(report.inbox.totals.pending, 2);
    assert.equal(report.outbox.pending, 1);
    await operator.end();
    assert.equal(await db.count('SELECT count(*) FROM {schema}.inbox_receipts'), 2);
  } finally {
    await db.drop();
  }
});

async function listen(url: string, channel: string): Promise<{ client: Client; payloads: string[] }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  const payloads: string[] = [];
  client.on('notification', (n) => payloads.push(n.payload ?? ''));
  await client.query(`LISTEN "${channel}"`);
  return { client, payloads };
}

async function eventually(condition: () => boolean, limitMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return condition();
}

test('accepting wakes C++ workers on boxcar_inbox_<schema>, and a committed emit wakes publishers; a rollback does not', async () => {
  const db = new TestSchema();
  try {
    const inboxListener = await listen(db.url, Inbox.notifyChannel(db.schema));
    const outboxListener = await listen(db.url, OutboxEmitter.notifyChannel(db.schema));
    const pool = db.pool();
    const inbox = new Inbox(pool, { schema: db.schema, consumers: [consumer] });
    await inbox.accept(request('w-1'));
    assert.ok(await eventually(() => inboxListener.payloads.includes(consumer)), 'no wake-up after accept');
    inboxListener.payloads.length = 0;
    await inbox.accept(request('w-1')); // a duplicate inserts nothing and needs no wake-up
    await inbox.acceptMany([request('w-2'), request('w-3')]);
    assert.ok(await eventually(() => inboxListener.payloads.includes(consumer)), 'no wake-up after acceptMany');

    const outbox = new OutboxEmitter({ schema: db.schema });
    const client = await pool.connect();
    const event = { eventType: 'order.projected', schemaVersion: 1, topic: 'orders.rolled', payload: {} };
    await client.query('BEGIN');
    await outbox.emit(client, event, { scope: { kind: 'global' } });
    await client.query('ROLLBACK');
    await client.query('BEGIN');
    await outbox.emit(client, { ...event, topic: 'orders.committed' }, { scope: { kind: 'global' } });
    await client.query('COMMIT');
    client.release();
    assert.ok(await eventually(() => outboxListener.payloads.includes('orders.committed')));
    assert.ok(!outboxListener.payloads.includes('orders.rolled'), 'a rolled-back emit woke the publishers');
    assert.equal(await db.count('SELECT count(*) FROM {schema}.outbox_events'), 1);
    await inbox.close();
    await inboxListener.client.end();
    await outboxListener.client.end();
  } finally {
    await db.drop();
  }
});

/** `boxcar status --json` for `schema` with `consumers` declared. */
function cliStatus(db: TestSchema, consumers: string[]): Record<string, unknown> {
  const out = execFileSync(process.env.BOXCAR_CLI_PATH!, ['status', '--json'], {
    env: {
      ...process.env,
      BOXCAR_DATABASE_URL: db.url,
      BOXCAR_SCHEMA: db.schema,
      BOXCAR_CONSUMERS: consumers.join(','),
    },
  });
  return JSON.parse(out.toString());
}

/** The document with every age replaced by 0, after checking both agree within a second. */
function withoutAges(doc: unknown, other: unknown): unknown {
  if (Array.isArray(doc)) return doc.map((d, i) => withoutAges(d, (other as unknown[])?.[i]));
  if (doc !== null && typeof doc === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc)) {
      const o = (other as Record<string, unknown>)?.[k];
      if (/_seconds$/.test(k) && typeof v === 'number') {
        assert.ok(typeof o === 'number' && Math.abs(v - o) < 1, `${k}: ${v} against ${String(o)}`);
        out[k] = 0;
      } else {
        out[k] = withoutAges(v, o);
      }
    }
    return out;
  }
  return doc;
}

test('status() is the document `boxcar status --json` prints, in every status and with an undeclared consumer', async () => {
  const db = new TestSchema();
  try {
    const pool = db.pool();
    const inbox = new Inbox(pool, { schema: db.schema, consumers: [consumer, 'audit.v1', 'ghost.v1'] });
    for (let i = 0; i < 12; ++i) await inbox.accept(request(`s-${i}`));
    await inbox.accept({ ...request('a-1'), consumer: 'audit.v1' });
    // Receipts in each state, written as a worker and an operator would leave them.
    await db.execute(`UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', completed_at = now()
                      WHERE message_id IN ('s-0', 's-1')`);
    await db.execute(`UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'HANDLER_PERMANENT'
                      WHERE message_id IN ('s-2', 's-3', 's-4')`);
    await db.execute(`UPDATE {schema}.inbox_receipts SET discarded_at = now(), discarded_by = 'ops'
                      WHERE message_id = 's-4'`);
    await db.execute(`UPDATE {schema}.inbox_receipts SET status = 'RETRYABLE', available_at = now() + interval '1 hour'
                      WHERE message_id = 's-5'`);
    await db.execute(`UPDATE {schema}.inbox_receipts SET available_at = now() - interval '90 seconds'
                      WHERE message_id = 's-6'`);
    const outbox = new OutboxEmitter({ schema: db.schema });
    const client = await pool.connect();
    await client.query('BEGIN');
    for (let i = 0; i < 3; ++i) {
      await outbox.emit(
        client,
        { eventType: 'e', schemaVersion: 1, topic: 'orders', payload: { i } },
        { scope: { kind: 'global' }, key: 'same-key' },
      );
    }
    await client.query('COMMIT');
    client.release();

    // A session holding a snapshot, so both documents name an xmin holder. Other tests'
    // sessions share this database and may hold an older one, so the holder is compared by
    // its fields, not by who it is.
    const holder = await pool.connect();
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT 1');
    const declared = [consumer, 'ghost.v1'];
    const mine = await status(pool, { schema: db.schema, consumers: declared });
    const theirs = cliStatus(db, declared) as unknown as StatusDocument;
    await holder.query('ROLLBACK');
    holder.release();
    assert.ok(mine.xmin_holder !== null && theirs.xmin_holder !== null);
    assert.deepStrictEqual(Object.keys(mine.xmin_holder).sort(), Object.keys(theirs.xmin_holder).sort());
    for (const [k, v] of Object.entries(mine.xmin_holder)) {
      assert.equal(typeof v, typeof (theirs.xmin_holder as unknown as Record<string, unknown>)[k], k);
    }
    assert.match(mine.xmin_holder.query_start ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const mineRest: Partial<StatusDocument> = { ...mine };
    const theirsRest: Partial<StatusDocument> = { ...theirs };
    delete mineRest.xmin_holder;
    delete theirsRest.xmin_holder;
    assert.deepStrictEqual(withoutAges(mineRest, theirsRest), withoutAges(theirsRest, mineRest));
    // What it says, not only that both say it.
    assert.equal(mine.inbox.consumers.length, 3);
    const main = mine.inbox.consumers.find((c) => c.consumer === consumer)!;
    assert.deepEqual(
      [main.pending, main.completed, main.dead, main.discarded, main.retryable, main.declared],
      [6, 2, 2, 1, 1, true],
    );
    assert.ok(main.oldest_due_age_seconds >= 90);
    assert.equal(mine.inbox.consumers.find((c) => c.consumer === 'audit.v1')!.declared, false);
    assert.equal(mine.inbox.consumers.find((c) => c.consumer === 'ghost.v1')!.pending, 0);
    assert.deepEqual([mine.outbox.pending, mine.outbox.waiting], [1, 2]);
    await inbox.close();
  } finally {
    await db.drop();
  }
});

test('a batch over maxStatementBytes is written by several statements in one transaction, whole', async () => {
  const db = new TestSchema();
  try {
    const pool = db.pool();
    const inbox = new Inbox(pool, { schema: db.schema, consumers: [consumer], maxStatementBytes: 2000 });
    const batch = Array.from({ length: 60 }, (_, i) => request(`b-${i}`, { orderId: `o-${i}`, pad: 'x'.repeat(50) }));
    const results = await inbox.acceptMany([...batch, batch[0], { ...batch[1], payload: { other: true } }]);
    assert.equal(results.filter((r) => r.ok && r.receipt.kind === 'accepted').length, 60);
    assert.equal(results[60].ok && results[60].receipt.kind, 'duplicate');
    assert.equal(!results[61].ok && results[61].error.code, 'IDENTITY_CONFLICT');
    assert.equal(await db.count('SELECT count(*) FROM {schema}.inbox_receipts'), 60);
    // The receipt a duplicate names is the one its identity got.
    const first = results[0].ok ? results[0].receipt.id : '';
    assert.equal(results[60].ok && results[60].receipt.id, first);
    await inbox.close();
  } finally {
    await db.drop();
  }
});

test('concurrent accepts of one identity from many connections: one accepted, the rest duplicates, one row', async () => {
  const db = new TestSchema();
  try {
    const pool = db.pool({ max: 16 });
    const inbox = new Inbox(pool, { schema: db.schema, consumers: [consumer] });
    for (let round = 0; round < 20; ++round) {
      const outcomes = await Promise.all(
        Array.from({ length: 16 }, () => inbox.accept(request(`race-${round}`)).then((r) => r.kind)),
      );
      assert.equal(outcomes.filter((k) => k === 'accepted').length, 1, `round ${round}`);
      assert.equal(outcomes.filter((k) => k === 'duplicate').length, 15, `round ${round}`);
    }
    assert.equal(await db.count('SELECT count(*) FROM {schema}.inbox_receipts'), 20);
    await inbox.close();
  } finally {
    await db.drop();
  }
});

test('a database that cannot be reached is STORAGE_FAILURE, never uncertain', async () => {
  const pool = new Pool({ connectionString: 'postgresql://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 2000 });
  const inbox = new Inbox(pool, { consumers: [consumer], notify: false });
  await assert.rejects(inbox.accept(request('x')), (e: { code?: string; uncertain?: boolean }) => {
    return e.code === 'STORAGE_FAILURE' && e.uncertain === false;
  });
  await assert.rejects(inbox.acceptMany([request('x')]), (e: { code?: string }) => e.code === 'STORAGE_FAILURE');
  await pool.end();
});

// A Node service built on the client, driven by the C++ end-to-end tests
// (tests/typescript/typescript_e2e_test.cpp), which set up the database, PgBouncer, a TCP
// proxy, the C++ worker, the publisher and the mock Kafka cluster around it, and check
// every count. Usage: node drive.js MODE CONFIG_JSON; prints one JSON line with what it
// observed.
import { existsSync } from 'node:fs';

import { Pool } from 'pg';

import { AcceptRequest, BoxcarError, Inbox, OutboxEmitter, status } from '../../src';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Config = any;

function request(config: Config, id: string, payload: unknown): AcceptRequest {
  return {
    scope: { kind: 'tenant', id: config.tenant ?? 'tenant-7' },
    source: 'node-ingress',
    consumer: config.consumer,
    messageId: id,
    eventType: 'order.created',
    schemaVersion: 1,
    payload,
    metadata: { correlationId: `corr-${id}` },
  };
}

interface Tally {
  accepted: number;
  duplicate: number;
  conflict: number;
  other: Record<string, number>;
}

function count(tally: Tally, outcome: string): void {
  if (outcome === 'accepted' || outcome === 'duplicate') tally[outcome] += 1;
  else if (outcome === 'IDENTITY_CONFLICT') tally.conflict += 1;
  else tally.other[outcome] = (tally.other[outcome] ?? 0) + 1;
}

async function settle(promise: Promise<{ kind: string }>): Promise<string> {
  try {
    return (await promise).kind;
  } catch (e) {
    if (e instanceof BoxcarError) return e.code;
    throw e;
  }
}

/** Runs `work` on `items` with at most `limit` in flight. */
async function pooled<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]);
  });
  await Promise.all(runners);
}

/** `count` messages: each accepted once; every redeliverEvery-th delivered again with the
 * same content (a duplicate), every conflictEvery-th again with other content (a
 * conflict). The first half goes through accept() concurrently, the rest through
 * acceptMany() batches, the extra deliveries mixed into later batches. */
async function ingress(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: config.connections ?? 8 });
  const inbox = new Inbox(pool, { schema: config.schema, consumers: [config.consumer] });
  const tally: Tally = { accepted: 0, duplicate: 0, conflict: 0, other: {} };
  const deliveries: { id: string; payload: unknown }[] = [];
  for (let i = 0; i < config.count; ++i) deliveries.push({ id: `m-${i}`, payload: { orderId: `o-${i}`, n: i } });
  for (let i = 0; i < config.count; ++i) {
    if (i % config.redeliverEvery === 0) deliveries.push({ id: `m-${i}`, payload: { n: i, orderId: `o-${i}` } });
    if (i % config.conflictEvery === 1) deliveries.push({ id: `m-${i}`, payload: { orderId: `o-${i}`, n: -i } });
  }
  const half = Math.floor(config.count / 2);
  await pooled(deliveries.slice(0, half), config.concurrency ?? 16, async (d) => {
    count(tally, await settle(inbox.accept(request(config, d.id, d.payload))));
  });
  const rest = deliveries.slice(half);
  for (let i = 0; i < rest.length; i += config.batchSize) {
    const batch = rest.slice(i, i + config.batchSize).map((d) => request(config, d.id, d.payload));
    for (const r of await inbox.acceptMany(batch)) count(tally, r.ok ? r.receipt.kind : r.error.code);
  }
  await inbox.close();
  await pool.end();
  return tally;
}

async function waitFor(path: string): Promise<void> {
  while (!existsSync(path)) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** Accepts identity `race-i` as soon as the file `${goPrefix}i` exists, for i < rounds. */
async function race(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: 2 });
  const inbox = new Inbox(pool, { schema: config.schema, consumers: [config.consumer] });
  await pool.query('SELECT 1'); // a warm connection, so both sides start equal
  process.stdout.write('ready\n');
  const outcomes: string[] = [];
  for (let i = 0; i < config.rounds; ++i) {
    await waitFor(`${config.goPrefix}${i}`);
    outcomes.push(await settle(inbox.accept(request(config, `race-${i}`, { orderId: `o-${i}` }))));
  }
  await inbox.close();
  await pool.end();
  return { outcomes };
}

/** `transactions` transactions, each inserting an application row and emitting one event;
 * those whose index is a multiple of rollbackEvery roll back, the others commit. */
async function emitter(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: 4 });
  const outbox = new OutboxEmitter({ schema: config.schema });
  const committed: string[] = [];
  const rolledBack: string[] = [];
  for (let t = 0; t < config.transactions; ++t) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`INSERT INTO "${config.schema}".node_orders (order_id) VALUES ($1)`, [`o-${t}`]);
      const event = await outbox.emit(
        client,
        { eventType: 'order.placed', schemaVersion: 1, topic: config.topic, payload: { orderId: `o-${t}`, n: t } },
        { scope: { kind: 'tenant', id: 'tenant-7' }, key: `o-${t}`, causationId: `t-${t}` },
      );
      if (t % config.rollbackEvery === 0) {
        await client.query('ROLLBACK');
        rolledBack.push(event.eventId);
      } else {
        await client.query('COMMIT');
        committed.push(event.eventId);
      }
    } finally {
      client.release();
    }
  }
  await pool.end();
  return { committed, rolledBack };
}

/** acceptMany over a proxy that loses the answer to the next COMMIT: a batch of several
 * statements (a tiny maxStatementBytes) runs in one transaction, so its outcome is
 * uncertain; the same batch again reconciles it. */
async function lostCommit(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: 2 });
  const inbox = new Inbox(pool, {
    schema: config.schema,
    consumers: [config.consumer],
    maxStatementBytes: 1200,
    notify: false,
  });
  const batch = Array.from({ length: config.count }, (_, i) => request(config, `lost-${i}`, { orderId: `o-${i}` }));
  let first: string;
  try {
    const results = await inbox.acceptMany(batch);
    first = results.every((r) => r.ok) ? 'ok' : 'item errors';
  } catch (e) {
    if (!(e instanceof BoxcarError)) throw e;
    first = e.code;
  }
  const again = (await inbox.acceptMany(batch)).map((r) => (r.ok ? r.receipt.kind : r.error.code));
  let single: string;
  try {
    single = (await inbox.accept(batch[0])).kind;
  } catch (e) {
    single = e instanceof BoxcarError ? e.code : String(e);
  }
  await inbox.close();
  await pool.end();
  return { first, again, single };
}

/** One accept() whose answer the proxy in front of the database loses (armed by the test
 * once "ready" is printed, then the file `go` appears): the autocommit insert may have
 * landed, so it is uncertain; the redelivery tells. */
async function lostReply(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: 1 });
  const inbox = new Inbox(pool, { schema: config.schema, consumers: [config.consumer], notify: false });
  await pool.query('SELECT 1'); // the connection is open: the next request on it is the insert
  process.stdout.write('ready\n');
  await waitFor(config.go);
  const r = request(config, 'lost-reply-1', { orderId: 'o-1' });
  const first = await settle(inbox.accept(r));
  const redelivered = await settle(inbox.accept(r));
  await inbox.close();
  await pool.end();
  return { first, redelivered };
}

/** The client's whole surface behind PgBouncer in transaction pooling: concurrent
 * accepts on more client connections than the pooler has server connections, batches,
 * emits in the caller's transactions, and status(). */
async function pgbouncer(config: Config): Promise<unknown> {
  const pool = new Pool({ connectionString: config.url, max: 12 });
  const inbox = new Inbox(pool, { schema: config.schema, consumers: [config.consumer] });
  const outbox = new OutboxEmitter({ schema: config.schema });
  const tally: Tally = { accepted: 0, duplicate: 0, conflict: 0, other: {} };
  const ids = Array.from({ length: config.count }, (_, i) => i);
  await pooled(ids, 12, async (i) => {
    count(tally, await settle(inbox.accept(request(config, `pgb-${i}`, { orderId: `o-${i}` }))));
  });
  for (let i = 0; i < config.count; i += 25) {
    const batch = ids.slice(i, i + 25).map((k) => request(config, `pgb-many-${k}`, { orderId: `o-${k}` }));
    for (const r of await inbox.acceptMany(batch)) count(tally, r.ok ? r.receipt.kind : r.error.code);
  }
  // Redeliveries through other server connections are recognised.
  await pooled(ids, 12, async (i) => {
    count(tally, await settle(inbox.accept(request(config, `pgb-${i}`, { orderId: `o-${i}` }))));
  });
  let emitted = 0;
  await pooled(
    Array.from({ length: config.emits }, (_, i) => i),
    6,
    async (i) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await outbox.emit(
          client,
          { eventType: 'order.placed', schemaVersion: 1, topic: 'orders.placed', payload: { n: i } },
          { scope: { kind: 'global' } },
        );
        await client.query('COMMIT');
        emitted += 1;
      } finally {
        client.release();
      }
    },
  );
  const report = await status(pool, { schema: config.schema, consumers: [config.consumer] });
  await inbox.close();
  await pool.end();
  return { tally, emitted, status: report };
}

const modes: Record<string, (config: Config) => Promise<unknown>> = {
  ingress,
  race,
  emitter,
  'lost-commit': lostCommit,
  'lost-reply': lostReply,
  pgbouncer,
};

async function main(): Promise<void> {
  const [mode, text] = process.argv.slice(2);
  const run = modes[mode];
  if (!run || !text) {
    process.stderr.write(`usage: drive.js ${Object.keys(modes).join('|')} CONFIG_JSON\n`);
    process.exit(2);
  }
  const result = await run(JSON.parse(text));
  process.stdout.write(`result ${JSON.stringify(result)}\n`);
}

main().catch((e) => {
  process.stderr.write(`drive: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});

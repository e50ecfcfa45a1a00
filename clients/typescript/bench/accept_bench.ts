// The Node client's accept() and acceptMany() throughput against a raw pg insert of the
// same rows, in the same run, as the C++ benches measure (docs/benchmarks.md, "How a
// measurement is made"): each round runs both sides back to back, the baseline first in
// odd rounds and the client first in even ones, and a case's figure is the median of the
// rounds' ratios. The last lines are `ratio CASE VALUE TARGET`.
//
//   node build/bench/accept_bench.js --database-url URL [--seconds S] [--rounds N]
//
// Needs a migrated schema: it runs `boxcar migrate` (BOXCAR_CLI_PATH) for a schema of
// its own and drops it at the end.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

import { Pool } from 'pg';

import { AcceptRequest, Inbox } from '../src';
import { kInsert, kInsertMany, withSchema } from '../src/queries';

interface Args {
  url: string;
  seconds: number;
  rounds: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { url: process.env.BOXCAR_TEST_DATABASE_URL ?? '', seconds: 2, rounds: 5 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--database-url') args.url = value;
    else if (flag === '--seconds') args.seconds = Number(value);
    else if (flag === '--rounds') args.rounds = Math.max(3, Number(value));
    else throw new Error(`unknown argument ${flag}`);
  }
  if (!args.url) throw new Error('--database-url URL (or BOXCAR_TEST_DATABASE_URL) is required');
  return args;
}

const consumer = 'bench.v1';
let sequence = 0;

function request(): AcceptRequest {
  const id = `m-${++sequence}`;
  return {
    scope: { kind: 'tenant', id: 'tenant-7' },
    source: 'bench',
    consumer,
    messageId: id,
    eventType: 'order.created',
    schemaVersion: 1,
    payload: { orderId: id, total: 12.5, lines: [{ sku: 'a', qty: 2 }] },
  };
}

/** The raw side: the same row, written by a plain parameterised insert whose values are
 * ready (no validation, no canonical form, no fingerprint computed). */
function rawParams(): unknown[] {
  const id = `m-${++sequence}`;
  return [
    'tenant',
    'tenant-7',
    'bench',
    consumer,
    id,
    'order.created',
    1,
    `{"lines":[{"qty":2,"sku":"a"}],"orderId":"${id}","total":12.5}`,
    '{}',
    'f'.repeat(64),
    null,
    null,
  ];
}

/** Runs `op` from `threads` concurrent loops for `seconds`; units completed per second. */
async function measure(seconds: number, threads: number, op: () => Promise<number>): Promise<number> {
  const deadline = Date.now() + seconds * 1000;
  let units = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: threads }, async () => {
      while (Date.now() < deadline) units += await op();
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  return units / elapsed;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

interface Case {
  name: string;
  detail: string;
  target: number;
  threads: number;
  baseline: () => Promise<number>;
  client: () => Promise<number>;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const schema = `bench_ts_${randomBytes(4).toString('hex')}`;
  execFileSync(process.env.BOXCAR_CLI_PATH ?? 'boxcar', ['migrate'], {
    env: { ...process.env, BOXCAR_DATABASE_URL: args.url, BOXCAR_SCHEMA: schema },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const pool = new Pool({ connectionString: args.url, max: 16 });
  const inbox = new Inbox(pool, { schema, consumers: [consumer] });
  const insert = withSchema(kInsert, schema);
  const insertMany = withSchema(kInsertMany, schema);
  const batch = 100;
  const rawBatch = async (): Promise<number> => {
    const columns: unknown[][] = Array.from({ length: 12 }, () => []);
    for (let i = 0; i < batch; ++i) rawParams().forEach((v, c) => columns[c].push(v));
    const params = columns.map((c, i) => (i === 7 || i === 8 ? `[${c.join(',')}]` : c));
    await pool.query(insertMany, params);
    return batch;
  };
  const cases: Case[] = [
    {
      name: 'ts_accept_1',
      detail: 'accept(), 1 caller, against one raw insert',
      target: 0.8,
      threads: 1,
      baseline: async () => {
        await pool.query(insert, rawParams());
        return 1;
      },
      client: async () => {
        await inbox.accept(request());
        return 1;
      },
    },
    {
      name: 'ts_accept_16',
      detail: 'accept(), 16 concurrent callers, against raw inserts',
      target: 0.8,
      threads: 16,
      baseline: async () => {
        await pool.query(insert, rawParams());
        return 1;
      },
      client: async () => {
        await inbox.accept(request());
        return 1;
      },
    },
    {
      name: 'ts_accept_many_100',
      detail: 'acceptMany() of 100, against the raw unnest insert of 100',
      target: 0.7,
      threads: 1,
      baseline: rawBatch,
      client: async () => {
        const results = await inbox.acceptMany(Array.from({ length: batch }, request));
        return results.length;
      },
    },
  ];
  console.log('case | detail | baseline/s | client/s | ratio');
  const lines: string[] = [];
  for (const c of cases) {
    const ratios: number[] = [];
    const base: number[] = [];
    const mine: number[] = [];
    for (let round = 1; round <= args.rounds; ++round) {
      let b: number;
      let m: number;
      if (round % 2 === 1) {
        b = await measure(args.seconds, c.threads, c.baseline);
        m = await measure(args.seconds, c.threads, c.client);
      } else {
        m = await measure(args.seconds, c.threads, c.client);
        b = await measure(args.seconds, c.threads, c.baseline);
      }
      base.push(b);
      mine.push(m);
      ratios.push(m / b);
    }
    console.log(
      `${c.name} | ${c.detail} | ${median(base).toFixed(0)} | ${median(mine).toFixed(0)} | ${median(ratios).toFixed(2)}`,
    );
    lines.push(`ratio ${c.name} ${median(ratios).toFixed(2)} ${c.target}`);
  }
  await inbox.close();
  await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await pool.end();
  for (const line of lines) console.log(line);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});

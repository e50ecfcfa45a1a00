// A fresh schema migrated by the C++ `boxcar migrate` (the tables are the C++ library's),
// in the test cluster of BOXCAR_TEST_DATABASE_URL, dropped again by drop().
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

import { Client, Pool, PoolConfig } from 'pg';

export function databaseUrl(): string {
  const url = process.env.BOXCAR_TEST_DATABASE_URL;
  if (!url) throw new Error('BOXCAR_TEST_DATABASE_URL is not set (run through scripts/test or ctest)');
  return url;
}

function cliPath(): string {
  const cli = process.env.BOXCAR_CLI_PATH;
  if (!cli) throw new Error('BOXCAR_CLI_PATH (the built `boxcar` CLI) is not set');
  return cli;
}

/** `url` with its user replaced. */
export function withUser(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}

export class TestSchema {
  readonly schema = `ts_${randomBytes(6).toString('hex')}`;
  readonly url = databaseUrl();
  /** The least-privilege roles, when made with roles: true (prefix `${schema}_`). */
  readonly rolePrefix: string | null;
  private readonly pools: Pool[] = [];
  private readonly logins: string[] = [];

  /** Migrates a new schema; with `roles`, also applies the five group roles to it. */
  constructor(options: { roles?: boolean } = {}) {
    const args = ['migrate'];
    this.rolePrefix = options.roles ? `${this.schema}_` : null;
    if (this.rolePrefix) args.push('--roles', '--role-prefix', this.rolePrefix);
    execFileSync(cliPath(), args, {
      env: { ...process.env, BOXCAR_DATABASE_URL: this.url, BOXCAR_SCHEMA: this.schema },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }

  /** A pool on the test cluster (as its superuser unless `url` says otherwise). */
  pool(config: PoolConfig = {}): Pool {
    const pool = new Pool({ connectionString: this.url, max: 4, ...config });
    this.pools.push(pool);
    return pool;
  }

  /** A LOGIN user that is a member of the group role `role` (e.g. "ingress"); its URL. */
  async loginAs(role: string): Promise<string> {
    if (!this.rolePrefix) throw new Error('made without roles');
    const user = `${this.rolePrefix}${role}_login`;
    await this.execute(`CREATE ROLE "${user}" LOGIN IN ROLE "${this.rolePrefix}${role}"`);
    this.logins.push(user);
    return withUser(this.url, user);
  }

  /** Runs `sql` with every {schema} replaced, on a connection of its own. */
  async query(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
    const client = new Client({ connectionString: this.url });
    await client.connect();
    try {
      return (await client.query(sql.split('{schema}').join(`"${this.schema}"`), params)).rows;
    } finally {
      await client.end();
    }
  }

  async execute(sql: string): Promise<void> {
    await this.query(sql);
  }

  async count(sql: string): Promise<number> {
    const rows = await this.query(sql);
    return Number(Object.values(rows[0])[0]);
  }

  async drop(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.end()));
    await this.execute(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`);
    for (const user of this.logins) await this.execute(`DROP ROLE IF EXISTS "${user}"`);
    if (this.rolePrefix) {
      for (const role of ['migrator', 'ingress', 'worker', 'publisher', 'operator']) {
        const name = `${this.rolePrefix}${role}`;
        const exists = await this.count(`SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = '${name}'`);
        if (exists === 0) continue;
        await this.execute(`DROP OWNED BY "${name}"`);
        await this.execute(`DROP ROLE "${name}"`);
      }
    }
  }
}

// The settings every script here shares, from the environment:
//
//   REDIS_URL=redis://127.0.0.1:6379   the Redis that BullMQ uses (redis://[user:pass@]host:port[/db])
//   BULLMQ_QUEUE=orders                 the queue name
export const queueName = process.env.BULLMQ_QUEUE || 'orders';

/** BullMQ connection options (ioredis) for REDIS_URL. */
export function connection() {
  const url = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  if (url.protocol !== 'redis:') throw new Error(`REDIS_URL: expected redis://, got ${url.protocol}//`);
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    db: Number(url.pathname.slice(1) || 0),
    // Workers block on Redis; BullMQ requires ioredis to retry their commands forever.
    maxRetriesPerRequest: null,
  };
}

/** A positive integer from the environment, or `fallback`. Throws naming the variable. */
export function intFromEnv(name, fallback) {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`${name}: expected a positive integer, got ${JSON.stringify(text)}`);
  }
  return value;
}

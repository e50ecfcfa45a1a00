// The package's example: a Node ingress that accepts one message into Boxcar's inbox and
// emits one event into its outbox in its own transaction. Run it twice: the first run is
// accepted, the redelivery a duplicate of the same receipt.
//
//   BOXCAR_DATABASE_URL=postgresql://... BOXCAR_SCHEMA=boxcar node index.js
const { Pool } = require('pg');
const { Inbox, OutboxEmitter, InboxStorageError, BoxcarError } = require('boxcar-client');

async function main() {
  const schema = process.env.BOXCAR_SCHEMA || 'boxcar';
  const pool = new Pool({ connectionString: process.env.BOXCAR_DATABASE_URL });
  const inbox = new Inbox(pool, { schema, consumers: ['orders.projection.v1'] });
  try {
    const receipt = await inbox.accept({
      scope: { kind: 'tenant', id: 'tenant-7' }, // from the authenticated caller
      source: 'orders-service',
      consumer: 'orders.projection.v1',
      messageId: 'evt-1001',
      eventType: 'order.created',
      schemaVersion: 1,
      payload: { orderId: 'o-42', total: 12.5 },
    });
    // accepted or duplicate: the message is durable; acknowledge the delivery now.
    console.log(`${receipt.kind} receipt ${receipt.id} (${receipt.status})`);
  } catch (e) {
    if (e instanceof InboxStorageError) {
      // Do not acknowledge: let the transport redeliver the same identity.
      console.error(`storage: ${e.code}`);
    } else if (e instanceof BoxcarError) {
      // Invalid input or IDENTITY_CONFLICT: reject or dead-letter, never retry at once.
      console.error(`rejected: ${e.code}`);
    }
    throw e;
  }

  // An event written in the caller's transaction: it commits with the business write.
  const outbox = new OutboxEmitter({ schema });
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const event = await outbox.emit(
      client,
      { eventType: 'order.noted', schemaVersion: 1, topic: 'orders.noted', payload: { orderId: 'o-42' } },
      { scope: { kind: 'tenant', id: 'tenant-7' }, causationId: 'evt-1001' },
    );
    await client.query('COMMIT');
    console.log(`emitted event ${event.eventId}`);
  } finally {
    client.release();
  }
  await inbox.close();
  await pool.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

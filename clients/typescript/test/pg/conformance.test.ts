// The client writes the rows the conformance vectors expect, on a schema migrated by the
// C++ library: every accept request's stored row (in order, on a fresh schema per suite),
// every emit's outbox row in the caller's transaction, and every accept sequence's
// outcomes (duplicates, conflicts, a DEAD receipt's duplicate, batches).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  AcceptResult,
  BoxcarError,
  Inbox,
  InboxValidationError,
  OutboxEmitter,
  OutboxValidationError,
  Receipt,
  canonicalizeText,
} from '../../src';
import { TestSchema } from '../support/database';
import { Json, emitOptionsFromJson, eventFromJson, inboxOptionsFromJson, load, requestFromJson } from '../support/vectors';

test('every accept request vector stores its row, in order on a fresh schema, or fails with its error', async () => {
  const failures: string[] = [];
  for (const suite of load('accept_requests.json').suites) {
    const db = new TestSchema();
    try {
      const inbox = new Inbox(db.pool(), inboxOptionsFromJson(suite.inbox, db.schema));
      for (const c of suite.cases as Json[]) {
        let got: Json;
        try {
          const receipt = await inbox.accept(requestFromJson(c.request));
          const [r] = await db.query(
            `SELECT scope_kind, scope_id, source, consumer, message_id, event_type, schema_version,
                    payload::text AS payload, metadata::text AS metadata, fingerprint, ordering_key,
                    park_after, status
             FROM {schema}.inbox_receipts WHERE id = $1`,
            [receipt.id],
          );
          got = {
            receipt: { kind: receipt.kind, status: receipt.status },
            row: {
              scopeKind: r.scope_kind,
              scopeId: r.scope_id,
              source: r.source,
              consumer: r.consumer,
              messageId: r.message_id,
              eventType: r.event_type,
              schemaVersion: r.schema_version,
              payload: canonicalizeText(r.payload as string),
              metadata: canonicalizeText(r.metadata as string),
              fingerprint: r.fingerprint,
              orderingKey: r.ordering_key,
              parkAfter: r.park_after,
              status: r.status,
            },
          };
        } catch (e) {
          if (!(e instanceof BoxcarError)) throw e;
          got = { error: e instanceof InboxValidationError ? { code: e.code, field: e.field } : { code: e.code } };
        }
        try {
          assert.deepStrictEqual(got, c.expect);
        } catch {
          failures.push(`${suite.name}: ${c.name}: want ${JSON.stringify(c.expect)}, got ${JSON.stringify(got)}`);
        }
      }
      await inbox.close();
    } finally {
      await db.drop();
    }
  }
  assert.deepStrictEqual(failures, []);
});

test("every emit vector writes its outbox row in the caller's transaction, or fails with its error", async () => {
  const failures: string[] = [];
  for (const suite of load('emit_requests.json').suites) {
    const db = new TestSchema();
    try {
      const pool = db.pool();
      const outbox = new OutboxEmitter({
        schema: db.schema,
        topics: suite.outbox.topics,
        maxRecordBytes: suite.outbox.maxRecordBytes,
        payloadLimits: suite.outbox.payloadLimits,
        notify: false,
      });
      const client = await pool.connect();
      for (const c of suite.cases as Json[]) {
        let got: Json;
        await client.query('BEGIN');
        try {
          const emitted = await outbox.emit(client, eventFromJson(c.event), emitOptionsFromJson(c.options));
          const {
            rows: [r],
          } = await client.query(
            `SELECT event_type, schema_version, topic, message_key, tenant_scope, tenant_id, causation_id,
                    correlation_id, traceparent, headers::text AS headers, payload, ordered, status, event_id::text
             FROM "${db.schema}".outbox_events WHERE id = $1`,
            [emitted.id],
          );
          assert.equal(r.event_id, emitted.eventId);
          got = {
            row: {
              eventType: r.event_type,
              schemaVersion: r.schema_version,
              topic: r.topic,
              messageKey: r.message_key === r.event_id ? { eventId: true } : r.message_key,
              tenantScope: r.tenant_scope,
              tenantId: r.tenant_id,
              causationId: r.causation_id,
              correlationId: r.correlation_id,
              traceparent: r.traceparent,
              headers: canonicalizeText(r.headers),
              payload: r.payload,
              ordered: r.ordered,
              status: r.status,
            },
          };
        } catch (e) {
          if (!(e instanceof OutboxValidationError)) throw e;
          got = { error: { code: e.code, field: e.field } };
        } finally {
          await client.query('ROLLBACK');
        }
        try {
          assert.deepStrictEqual(got, c.expect);
        } catch {
          failures.push(`${suite.name}: ${c.name}: want ${JSON.stringify(c.expect)}, got ${JSON.stringify(got)}`);
        }
      }
      client.release();
    } finally {
      await db.drop();
    }
  }
  assert.deepStrictEqual(failures, []);
});

function receiptJson(r: Receipt): Json {
  return { kind: r.kind, status: r.status };
}

function outcomeJson(r: AcceptResult): Json {
  return r.ok ? receiptJson(r.receipt) : { error: r.error.code };
}

test('every accept sequence vector gives its outcomes step by step and stores its rows', async () => {
  const scenarios: Json[] = load('accept_sequences.json').scenarios;
  assert.ok(scenarios.length >= 10);
  for (const scenario of scenarios) {
    const db = new TestSchema();
    try {
      const inbox = new Inbox(db.pool(), inboxOptionsFromJson(scenario.inbox, db.schema));
      for (const [i, step] of (scenario.steps as Json[]).entries()) {
        let got: Json;
        if (step.accept) {
          try {
            got = receiptJson(await inbox.accept(requestFromJson(step.accept)));
          } catch (e) {
            if (!(e instanceof BoxcarError)) throw e;
            got = { error: e.code };
          }
        } else {
          got = (await inbox.acceptMany((step.acceptMany as Json[]).map(requestFromJson))).map(outcomeJson);
        }
        assert.deepStrictEqual(got, step.expect, `${scenario.name}, step ${i + 1}`);
        if (step.sql) await db.execute(step.sql);
      }
      assert.equal(await db.count('SELECT count(*) FROM {schema}.inbox_receipts'), scenario.storedRows, scenario.name);
      await inbox.close();
    } finally {
      await db.drop();
    }
  }
});

// The client agrees with the shared conformance vectors on every case that needs no
// database: canonical JSON (its errors and paths included), fingerprints, and every accept
// request's validation error or stored values; and each rule of the usage guide is covered.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Inbox, JsonValueError, InboxValidationError, canonicalizeText, contentFingerprint } from '../../src';
import { javascriptRuleTests } from '../support/javascript_rules';
import { Json, caseText, inboxOptionsFromJson, load, requestFromJson } from '../support/vectors';
import type { Pool } from 'pg';

// validate() never touches the database.
const unusedPool = {} as Pool;

function outcome(run: () => string): { canonical: string } | { error: { code: string; path: string } } {
  try {
    return { canonical: run() };
  } catch (e) {
    if (!(e instanceof JsonValueError)) throw e;
    return { error: { code: e.code, path: e.path } };
  }
}

test('every canonical JSON vector gives its canonical form or its error at its path', () => {
  const cases: Json[] = load('canonical_json.json').cases;
  assert.ok(cases.length >= 1000, `only ${cases.length} cases`);
  const failures: string[] = [];
  for (const c of cases) {
    const limits = c.limits ?? undefined;
    const got = outcome(() => canonicalizeText(caseText(c), limits));
    const want = c.canonical !== undefined ? { canonical: c.canonical } : { error: c.error };
    try {
      assert.deepStrictEqual(got, want);
    } catch {
      failures.push(`${c.name}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
    }
  }
  assert.deepStrictEqual(failures, []);
});

test('every fingerprint vector gives its canonical payload and content fingerprint', () => {
  const cases: Json[] = load('fingerprints.json').cases;
  assert.ok(cases.length >= 300);
  for (const c of cases) {
    const canonical = canonicalizeText(c.payloadText);
    assert.equal(canonical, c.canonicalPayload, c.name);
    assert.equal(contentFingerprint(c.eventType, c.schemaVersion, canonical), c.fingerprint, c.name);
  }
});

test('every accept request vector is refused with its code and field, or validates to its stored values', () => {
  let count = 0;
  const failures: string[] = [];
  for (const suite of load('accept_requests.json').suites) {
    const inbox = new Inbox(unusedPool, inboxOptionsFromJson(suite.inbox, 'boxcar'));
    for (const c of suite.cases as Json[]) {
      ++count;
      const name = `${suite.name}: ${c.name}`;
      let got: Json;
      try {
        const p = inbox.validate(requestFromJson(c.request));
        got = {
          payload: p.canonicalPayload,
          metadata: p.metadataJson,
          fingerprint: p.fingerprint,
          orderingKey: p.orderingKey,
          parkAfter: p.parkAfter,
          scopeKind: p.scopeKind,
          scopeId: p.scopeId,
        };
      } catch (e) {
        if (!(e instanceof InboxValidationError)) throw e;
        got = { error: { code: e.code, field: e.field } };
      }
      const want = c.expect.error
        ? { error: c.expect.error }
        : {
            payload: c.expect.row.payload,
            metadata: c.expect.row.metadata,
            fingerprint: c.expect.row.fingerprint,
            orderingKey: c.expect.row.orderingKey,
            parkAfter: c.expect.row.parkAfter,
            scopeKind: c.expect.row.scopeKind,
            scopeId: c.expect.row.scopeId,
          };
      try {
        assert.deepStrictEqual(got, want);
      } catch {
        failures.push(`${name}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      }
    }
  }
  assert.deepStrictEqual(failures, []);
  assert.ok(count >= 200);
});

test('every rule of the usage guide is covered by a vector case or by a client test', () => {
  const covered = new Set<string>();
  const collect = (cases: Json[]) => {
    for (const c of cases) if (c.rule) covered.add(c.rule);
  };
  collect(load('canonical_json.json').cases);
  collect(load('fingerprints.json').cases);
  for (const suite of load('accept_requests.json').suites) collect(suite.cases);
  for (const suite of load('emit_requests.json').suites) collect(suite.cases);
  collect(load('accept_sequences.json').scenarios);
  const rules: Json[] = load('rules.json').rules;
  assert.ok(rules.length >= 15);
  // The JavaScript-only rules name a test of test/unit/javascript_values.test.ts.
  for (const rule of rules) {
    if (rule.typescriptTest) {
      assert.ok(javascriptRuleTests.includes(rule.typescriptTest), `no test named '${rule.typescriptTest}'`);
    } else {
      assert.ok(covered.has(rule.id), `no case covers ${rule.id}`);
    }
  }
});

test('the vectors hold at least 2,000 cases', () => {
  let total =
    load('canonical_json.json').cases.length +
    load('fingerprints.json').cases.length +
    load('accept_sequences.json').scenarios.length;
  for (const suite of load('accept_requests.json').suites) total += suite.cases.length;
  for (const suite of load('emit_requests.json').suites) total += suite.cases.length;
  assert.ok(total >= 2000, `${total} cases`);
});

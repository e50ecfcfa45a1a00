// The operator console in a real browser, driven headless by puppeteer-core (pinned in
// package-lock.json): Debian's Chromium over the DevTools protocol, or Debian's Firefox ESR
// over WebDriver BiDi. console_browser_test.cpp starts the pipeline and the console, writes
// what the database holds to the file EXPECT names, and runs this script:
//
//   BROWSER=chromium|firefox CONSOLE_URL=http://127.0.0.1:PORT ADMIN_TOKEN=... \
//     EXPECT=expect.json SCREENSHOTS=DIR node browser_test.mjs
//
// It exits 0 when the page showed every expected number, refused actions without the
// admin token and without the CSRF token, showed the snapshot holder's pid, and retried
// the poison group through the confirmation dialog; otherwise it prints why and exits 1.
// Both browsers run every step and every check below; only the launch differs.
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const url = process.env.CONSOLE_URL;
const token = process.env.ADMIN_TOKEN;
const expect = JSON.parse(readFileSync(process.env.EXPECT, 'utf8'));
const shots = process.env.SCREENSHOTS;
const timeout = 30000;

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// Set when each page opens. Not with page.setViewport: over WebDriver BiDi that also sends
// emulation.setScreenOrientationOverride, which Firefox ESR 140 (Debian 12's main archive;
// bookworm-security has 153) does not know; puppeteer tolerates that for the launch's
// defaultViewport, and the viewport itself is set either way.
const viewport = { width: 1280, height: 860 };

// How each browser starts. BROWSER_PATH overrides the Debian binary.
const launchers = {
  chromium: (profile) => ({
    browser: 'chrome',
    executablePath: process.env.BROWSER_PATH || '/usr/bin/chromium',
    headless: true,
    userDataDir: profile,
    defaultViewport: viewport,
    // The closed network makes Chromium's background services hang without these.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  }),
  firefox: (profile) => ({
    browser: 'firefox',
    executablePath: process.env.BROWSER_PATH || '/usr/bin/firefox-esr',
    headless: true,
    userDataDir: profile,
    defaultViewport: viewport,
  }),
};
const browserName = process.env.BROWSER || 'chromium';
check(browserName in launchers, 'BROWSER must be one of ' + Object.keys(launchers).join(', ') + ': ' + browserName);

// Waits until `predicate(...args)`, run in the page, returns true. Not page.waitForFunction:
// its poller rebuilds the predicate with `new Function` inside the page, which the console's
// Content-Security-Policy (no 'unsafe-eval') blocks in Firefox ESR 140 over WebDriver BiDi.
// page.evaluate runs the predicate as the protocol's own call, outside the page's CSP.
async function waitFor(page, predicate, ...args) {
  const deadline = Date.now() + timeout;
  while (!(await page.evaluate(predicate, ...args))) {
    if (Date.now() > deadline)
      throw new Error(`still false after ${timeout} ms: ${String(predicate).replace(/\s+/g, ' ')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// Waits until the text of `selector` equals `expected` (the page refreshes itself).
async function waitForText(page, selector, expected) {
  try {
    await waitFor(page, (s, e) => {
      const node = document.querySelector(s);
      return node !== null && node.textContent.trim() === e;
    }, selector, String(expected));
  } catch (error) {
    const actual = await page.$eval(selector, (n) => n.textContent.trim()).catch(() => '(missing)');
    throw new Error(`${selector}: expected "${expected}", the page shows "${actual}" (${error.message})`);
  }
}

async function open(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

const profile = mkdtempSync(join(tmpdir(), `boxcar-console-${browserName}-`));
// A generous start-up limit (puppeteer's default is 30 s): the suite runs beside compilers.
const browser = await puppeteer.launch({ ...launchers[browserName](profile), timeout: 120000 });
let failed = null;
try {
  const page = await browser.newPage();
  const violations = [];
  page.on('console', (message) => {
    // Chromium logs every 4xx answer as "Failed to load resource" (Firefox logs none): the
    // refusals below are expected ones. Anything else (a CSP violation, a script error) is a
    // failure; Firefox reports a CSP violation as a page error.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
      violations.push(message.text());
  });
  page.on('pageerror', (error) => violations.push('page error: ' + error.message));
  page.on('request', (request) => {
    if (!request.url().startsWith(url) && !request.url().startsWith('data:')) violations.push('fetched ' + request.url());
  });
  await page.goto(url + '/#overview', { waitUntil: 'load' });

  // 1. Every number the database holds, per consumer.
  for (const [consumer, counts] of Object.entries(expect.consumers)) {
    for (const [field, value] of Object.entries(counts))
      await waitForText(page, `#consumers tr[data-consumer="${consumer}"] td[data-field="${field}"]`, value);
  }
  await waitForText(page, '#outbox td[data-field="unpublished"]', expect.outbox_unpublished);
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });

  await open(page, '#dead');
  await waitForText(page, `#groups tr[data-group="${expect.group}"] td[data-field="count"]`, expect.group_count);
  await waitForText(page, `#groups tr[data-group="${expect.group}"] td[data-field="failure"]`, expect.failure);

  await open(page, '#keys');
  await waitForText(page, `#keys tr[data-key="${expect.key.key}"] td[data-field="scope"]`, expect.key.scope);
  await waitForText(page, `#keys tr[data-key="${expect.key.key}"] td[data-field="status"]`, expect.key.status);
  await waitForText(page, `#keys tr[data-key="${expect.key.key}"] td[data-field="blocked_since"]`,
    expect.key.blocked_since);

  // 2. The session holding the snapshot, named on the health panel.
  await open(page, '#health');
  await waitForText(page, `#xmin tr[data-pid="${expect.holder_pid}"] td[data-field="pid"]`, expect.holder_pid);

  // 3. Refused without the admin token, and without the CSRF token.
  const refusals = await page.evaluate(async (admin, group) => {
    const session = await (await fetch('/api/v1/session')).json();
    const body = JSON.stringify({ action: 'retry', kind: 'inbox', group, confirm_rows: 3, actor: 'mallory' });
    const noToken = await fetch('/api/v1/actions/run', {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': session.csrf_token }, body });
    const noCsrf = await fetch('/api/v1/actions/run', {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + admin }, body });
    return [noToken.status, (await noToken.json()).error.code, noCsrf.status, (await noCsrf.json()).error.code];
  }, token, expect.group);
  check(refusals[0] === 401 && refusals[1] === 'ADMIN_TOKEN_REQUIRED', 'without the admin token: ' + refusals.slice(0, 2));
  check(refusals[2] === 403 && refusals[3] === 'CSRF_TOKEN_REQUIRED', 'without the CSRF token: ' + refusals.slice(2));
  const stillDead = await page.evaluate(async (group) =>
    (await (await fetch('/api/v1/dead/groups/' + group + '?kind=inbox')).json()).records.length, expect.group);
  check(stillDead === expect.group_count, 'a refused action changed rows: ' + stillDead + ' left');

  // 4. Sign in, open the group, retry it and confirm with its row count.
  await page.type('#login-actor', 'alice');
  await page.type('#login-token', token);
  await page.click('#login-submit');
  await waitFor(page, () => document.body.classList.contains('admin'));
  await open(page, `#group/inbox/${expect.group}`);
  await waitFor(page, (n) => document.querySelectorAll('#records tbody tr[data-id]').length === n,
    expect.group_count);
  await page.screenshot({ path: join(shots, 'dead-group.png'), fullPage: true });
  await page.click('#group-retry');
  await waitFor(page, () => document.querySelector('#confirm').open);
  const question = await page.$eval('#confirm-text', (n) => n.textContent);
  check(question.includes(`will change ${expect.group_count} rows`), 'the confirmation says: ' + question);
  await page.type('#confirm-rows', String(expect.group_count - 1));
  await page.click('#confirm-ok');
  const wrong = await page.$eval('#confirm-error', (n) => n.textContent);
  check(wrong.includes(`Type ${expect.group_count}`), 'a wrong count was accepted: ' + wrong);
  await page.$eval('#confirm-rows', (n) => { n.value = ''; });
  await page.type('#confirm-rows', String(expect.group_count));
  await page.click('#confirm-ok');
  await waitFor(page, (n) => document.querySelector('#status').textContent.includes(`${n} row(s) changed`),
    expect.group_count);

  // 5. The receipts complete: the group empties, the consumer's DEAD count drops to 0, and
  // the action is on the record with its actor.
  await waitForText(page, '#records tbody td', 'no DEAD records left in this group');
  await open(page, '#overview');
  await waitForText(page, `#consumers tr[data-consumer="${expect.retried_consumer}"] td[data-field="dead"]`, 0);
  await open(page, '#actions');
  await waitForText(page, '#action-log td[data-field="actor"]', 'console:alice');
  await waitForText(page, '#action-log td[data-field="rows"]', expect.group_count);

  check(violations.length === 0, 'console errors or foreign requests: ' + violations.join('; '));
  console.log(`console browser test (${await browser.version()}): ok`);
} catch (error) {
  failed = error;
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
if (failed) {
  console.error(`console browser test (${browserName}) failed: ` + failed.message);
  process.exit(1);
}

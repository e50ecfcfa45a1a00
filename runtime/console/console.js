// The Boxcar operator console: renders the JSON API under /api/v1/ (docs/console.md) and
// refreshes the current view every refresh_ms with fetch, never with a full reload.
// Every value from the server is placed with textContent, never parsed as HTML.
'use strict';

const state = {
  session: null,
  token: sessionStorage.getItem('boxcar.console.token') || '',
  actor: sessionStorage.getItem('boxcar.console.actor') || '',
  timer: null,
  loadFailed: false,
};

const $ = (selector) => document.querySelector(selector);

function headers(extra) {
  const out = Object.assign({ Accept: 'application/json' }, extra || {});
  if (state.token) out.Authorization = 'Bearer ' + state.token;
  return out;
}

async function api(path, options) {
  const response = await fetch('/api/v1/' + path, Object.assign({ headers: headers(), cache: 'no-store' }, options || {}));
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error((body.error && body.error.message) || response.statusText);
    error.code = body.error && body.error.code;
    error.status = response.status;
    error.body = body;
    throw error;
  }
  return body;
}

function post(path, body) {
  return api(path, {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json', 'X-CSRF-Token': state.session.csrf_token }),
    body: JSON.stringify(body),
  });
}

// ---- rendering helpers ----------------------------------------------------------------

function cell(row, value, options) {
  const td = document.createElement('td');
  const o = options || {};
  td.textContent = value === null || value === undefined ? '' : String(value);
  if (o.number) td.className = 'number';
  if (o.alert) td.classList.add('alert');
  if (o.failure) td.className = 'failure';
  if (o.field) td.dataset.field = o.field;
  row.appendChild(td);
  return td;
}

function linkCell(row, text, href) {
  const td = document.createElement('td');
  const a = document.createElement('a');
  a.href = href;
  a.textContent = text;
  td.appendChild(a);
  row.appendChild(td);
  return td;
}

function buttonCell(row, text, onClick, danger) {
  const td = document.createElement('td');
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = text;
  button.className = 'admin-only' + (danger ? ' danger' : '');
  button.addEventListener('click', onClick);
  td.appendChild(button);
  row.appendChild(td);
  return button;
}

function fill(tableSelector, items, render, empty) {
  const body = $(tableSelector + ' tbody');
  body.replaceChildren();
  if (!items.length) {
    const row = body.insertRow();
    const td = cell(row, empty || 'nothing here');
    td.colSpan = $(tableSelector + ' thead tr').children.length;
    td.className = 'muted';
    return;
  }
  for (const item of items) render(body.insertRow(), item);
}

function age(seconds) {
  const s = Math.floor(seconds || 0);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd' + String(Math.floor((s % 86400) / 3600)).padStart(2, '0') + 'h';
}

function time(text) { return text ? text.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : ''; }

function bytes(n) {
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return value.toFixed(1) + ' ' + units[unit];
}

function fields(list, pairs) {
  list.replaceChildren();
  for (const [name, value] of pairs) {
    const dt = document.createElement('dt');
    dt.textContent = name;
    const dd = document.createElement('dd');
    dd.textContent = value === null || value === undefined || value === '' ? '—' : String(value);
    dd.dataset.field = name;
    list.append(dt, dd);
  }
}

function status(text, error) {
  const p = $('#status');
  p.textContent = text;
  p.classList.toggle('error', !!error);
}

// ---- views ---------------------------------------------------------------------------

async function showOverview() {
  const o = await api('overview');
  const figures = o.figures.inbox;
  $('#figures-age').textContent = figures.known
    ? 'Backlog figures ' + age(figures.age_seconds) + ' old, collected by ' + figures.collected_by +
      '; completions over the last ' + o.rate_window_seconds + 's.'
    : 'No backlog figures collected yet.';
  fill('#consumers', o.inbox.consumers, (row, c) => {
    row.dataset.consumer = c.consumer;
    cell(row, c.consumer + (c.declared ? '' : ' (undeclared)'));
    for (const name of ['pending', 'retryable', 'processing', 'waiting', 'dead']) {
      const estimated = c.estimated.includes(name) ? '≈' : '';
      cell(row, estimated + c[name], { number: true, field: name, alert: name === 'dead' && c[name] > 0 });
    }
    cell(row, age(c.oldest_due_age_seconds), { number: true, field: 'oldest_due' });
    cell(row, c.completions_per_second.toFixed(2), { number: true, field: 'completions_per_second' });
  }, 'no consumers');
  const ob = o.outbox;
  fill('#outbox', [ob], (row) => {
    for (const name of ['unpublished', 'pending', 'waiting', 'publishing', 'retryable', 'dead'])
      cell(row, ob[name], { number: true, field: name, alert: name === 'dead' && ob[name] > 0 });
    cell(row, age(ob.oldest_unpublished_age_seconds), { number: true, field: 'oldest_unpublished' });
    cell(row, ob.deliveries_per_second.toFixed(2), { number: true, field: 'deliveries_per_second' });
  });
  fill('#outbox-errors', ob.recent_errors, (row, e) => {
    linkCell(row, String(e.id), '#record/outbox/' + e.id);
    cell(row, e.topic);
    cell(row, e.event_type);
    cell(row, e.failure, { failure: true });
    cell(row, time(e.at));
  }, 'no outbox failures');
  $('#tenants-note').textContent = 'Among the ' + o.top_tenants.sample_per_consumer +
    ' oldest due receipts of each of the most backlogged consumers: who waits longest.';
  fill('#tenants', o.top_tenants.tenants, (row, t) => {
    cell(row, t.consumer);
    cell(row, t.scope);
    cell(row, t.due, { number: true, field: 'due' });
  }, 'no due backlog');
}

async function showGroups(kind) {
  $('#dead-inbox').classList.toggle('current', kind === 'inbox');
  $('#dead-outbox').classList.toggle('current', kind === 'outbox');
  const g = await api('dead/groups?kind=' + kind);
  fill('#groups', g.groups, (row, group) => {
    row.dataset.group = group.group;
    linkCell(row, group.group, '#group/' + kind + '/' + group.group);
    cell(row, group.count, { number: true, field: 'count' });
    cell(row, time(group.first_seen));
    cell(row, time(group.last_seen));
    cell(row, group.failure, { failure: true, field: 'failure' });
    cell(row, group.event_types.join(', '));
    cell(row, (kind === 'inbox' ? group.consumers : group.topics).join(', '));
    buttonCell(row, 'Retry', () => act({ action: 'retry', kind, group: group.group }));
  }, 'no DEAD records');
}

const groupView = { kind: 'inbox', group: '', next: null };

function recordRow(kind) {
  return (row, r) => {
    row.dataset.id = r.id;
    linkCell(row, String(r.id), '#record/' + kind + '/' + r.id);
    cell(row, kind === 'inbox' ? r.consumer : r.topic);
    cell(row, kind === 'inbox' ? r.source + ' / ' + r.message_id : r.event_id + ' / ' + r.message_key);
    cell(row, r.scope);
    cell(row, r.attempts, { number: true });
    cell(row, (r.last_error_type ? r.last_error_type + ': ' : '') + r.last_error, { failure: true });
    cell(row, time(r.died_at));
    cell(row, r.replay_count ? r.replay_count + '× by ' + r.last_replayed_by : '');
  };
}

async function showGroup(kind, group, append) {
  if (!append) { groupView.kind = kind; groupView.group = group; groupView.next = null; }
  $('#group-key').textContent = group;
  let query = 'dead/groups/' + encodeURIComponent(group) + '?kind=' + kind + '&limit=50';
  if (append && groupView.next) {
    const n = groupView.next;
    query += '&after_id=' + n.id + '&after_us=' + n.updated_at_us +
      (n.consumer !== undefined ? '&after_consumer=' + encodeURIComponent(n.consumer) : '');
  }
  const page = await api(query);
  if (append) {
    const render = recordRow(kind);
    for (const r of page.records) render($('#records tbody').insertRow(), r);
  } else {
    fill('#records', page.records, recordRow(kind), 'no DEAD records left in this group');
    const groups = await api('dead/groups?kind=' + kind);
    const found = groups.groups.find((g) => g.group === group);
    $('#group-failure').textContent = found ? found.failure + ' — ' + found.count + ' records' : '';
  }
  groupView.next = page.next;
  $('#records-more').hidden = !page.next;
}

async function showRecord(kind, id) {
  const r = await api('dead/records/' + id + '?kind=' + kind);
  $('#receipt-id').textContent = kind + ' ' + id;
  const audit = (a) => (a.at ? time(a.at) + ' by ' + a.by : '');
  const pairs = kind === 'inbox'
    ? [['consumer', r.consumer], ['source', r.source], ['message id', r.message_id], ['scope', r.scope],
      ['event type', r.event_type + ' v' + r.schema_version], ['ordering key', r.ordering_key],
      ['attempts', r.attempts], ['dead reason', r.dead_reason], ['error', r.last_error_type + ': ' + r.last_error],
      ['group', r.group], ['created', time(r.created_at)], ['died', time(r.died_at)],
      ['replayed', r.replay_count ? r.replay_count + '×, last ' + audit(r.last_replayed) : ''],
      ['discarded', audit(r.discarded)], ['key released', audit(r.key_released)]]
    : [['topic', r.topic], ['key', r.message_key], ['event id', r.event_id], ['scope', r.scope],
      ['event type', r.event_type + ' v' + r.schema_version], ['attempts', r.attempts],
      ['dead reason', r.dead_reason], ['error', r.last_error], ['group', r.group], ['created', time(r.created_at)],
      ['died', time(r.died_at)], ['replayed', r.replay_count ? r.replay_count + '×, last ' + audit(r.last_replayed) : ''],
      ['discarded', audit(r.discarded)]];
  fields($('#receipt-fields'), pairs);
  const hidden = 'shown to an admin only';
  $('#receipt-payload').textContent = r.content_shown ? JSON.stringify(r.payload, null, 2) : hidden;
  $('#receipt-metadata').textContent = r.content_shown ? JSON.stringify(r.metadata, null, 2) : hidden;
  $('#receipt-retry').onclick = () => act({ action: 'retry', kind, id: Number(id) });
  $('#receipt-discard').onclick = () => act({ action: 'discard', kind, id: Number(id) });
}

async function showKeys() {
  const k = await api('blocked-keys');
  fill('#keys', k.keys, (row, key) => {
    row.dataset.key = key.key;
    cell(row, key.consumer);
    cell(row, key.scope, { field: 'scope' });
    cell(row, key.key, { field: 'key' });
    linkCell(row, String(key.receipt_id), '#record/inbox/' + key.receipt_id);
    cell(row, key.status, { alert: key.status === 'DEAD', field: 'status' });
    cell(row, key.attempts, { number: true });
    cell(row, (key.error_type ? key.error_type + ': ' : '') + key.error, { failure: true });
    cell(row, time(key.blocked_since), { field: 'blocked_since' });
    cell(row, age(key.blocked_seconds), { number: true });
    const button = buttonCell(row, 'Unblock',
      () => act({ action: 'unblock', kind: 'inbox', key: key.key, consumer: key.consumer, scope: key.scope }));
    button.disabled = key.status !== 'DEAD';
  }, 'no blocked keys');
}

async function showHealth() {
  const h = await api('health');
  fill('#xmin', h.xmin_holders, (row, x) => {
    row.dataset.pid = x.pid;
    cell(row, x.pid, { field: 'pid' });
    cell(row, x.application_name || '—');
    cell(row, x.user || '—');
    cell(row, x.state || '—', { alert: x.state.startsWith('idle in transaction') });
    cell(row, age(x.transaction_age_seconds), { number: true });
    cell(row, x.xmin_age, { number: true });
    cell(row, time(x.query_start));
  }, 'no session holds a snapshot');
  fill('#slots', h.replication_slots, (row, s) => {
    cell(row, s.slot_name);
    cell(row, s.slot_type);
    cell(row, s.active ? 'yes' : 'no', { alert: !s.active });
    cell(row, bytes(s.retained_wal_bytes), { number: true });
    cell(row, s.xmin_age, { number: true });
    cell(row, s.wal_status);
  }, 'no replication slots');
  fill('#tables', h.tables, (row, t) => {
    row.dataset.table = t.table;
    cell(row, t.table);
    cell(row, t.live_tuples, { number: true });
    cell(row, t.dead_tuples, { number: true, field: 'dead_tuples' });
    cell(row, time(t.last_vacuum) || 'never');
    cell(row, time(t.last_autovacuum) || 'never');
  });
  fill('#locks', h.lock_waits, (row, l) => {
    cell(row, l.pid);
    cell(row, l.application_name);
    cell(row, l.table);
    cell(row, l.mode);
    cell(row, age(l.waiting_seconds), { number: true });
    cell(row, (l.blocked_by || []).join(', '));
  }, 'no session waits for a lock on these tables');
  const m = h.migrations;
  fields($('#cluster'), [
    ['NOTIFY queue used', (h.notification_queue_usage * 100).toFixed(4) + ' %'],
    ['migrations', m.detail],
    ['applied version', m.applied_version],
    ['this build', m.build_version],
    ['compatible', m.compatible ? 'yes' : 'NO'],
  ]);
}

async function showActions() {
  const a = await api('actions');
  fill('#action-log', a.actions, (row, x) => {
    cell(row, time(x.at));
    cell(row, x.actor, { field: 'actor' });
    cell(row, x.action, { field: 'action' });
    cell(row, x.kind);
    cell(row, x.target, { field: 'target' });
    cell(row, x.rows, { number: true, field: 'rows' });
  }, 'no recorded actions');
}

// ---- actions -------------------------------------------------------------------------

// Preview, ask for the row count, run with it.
async function act(request) {
  try {
    const preview = await post('actions/preview', request);
    const rows = preview.rows;
    const confirmed = await confirmRows(preview.action + ' ' + preview.kind + ' ' + preview.target + ' will change ' +
      rows + ' row' + (rows === 1 ? '' : 's') + (preview.limit_reached ? ' (the most one action takes)' : '') + '.', rows);
    if (!confirmed) { status('cancelled'); return; }
    const done = await post('actions/run', Object.assign({}, request, { confirm_rows: rows, actor: state.actor }));
    status(done.action + ' ' + done.target + ': ' + done.rows + ' row(s) changed, recorded as console:' + state.actor);
    await refresh();
  } catch (error) {
    status('refused: ' + (error.code ? error.code + ': ' : '') + error.message, true);
  }
}

function confirmRows(text, rows) {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-rows').value = '';
  $('#confirm-error').textContent = '';
  return new Promise((resolve) => {
    const done = (value) => {
      $('#confirm-form').onsubmit = null;
      $('#confirm-cancel').onclick = null;
      dialog.close();
      resolve(value);
    };
    $('#confirm-form').onsubmit = (event) => {
      event.preventDefault();
      if ($('#confirm-rows').value.trim() !== String(rows)) {
        $('#confirm-error').textContent = 'Type ' + rows + ' to confirm.';
        return;
      }
      done(true);
    };
    $('#confirm-cancel').onclick = () => done(false);
    dialog.showModal();
    $('#confirm-rows').focus();
  });
}

// ---- navigation, sign-in, refresh ---------------------------------------------------------

function route() {
  const parts = (location.hash.replace(/^#/, '') || 'overview').split('/');
  return parts;
}

async function refresh() {
  const parts = route();
  const name = parts[0];
  const views = { overview: 'overview', dead: 'dead', group: 'group', record: 'receipt', keys: 'keys', health: 'health',
    actions: 'actions' };
  const view = views[name] || 'overview';
  for (const section of document.querySelectorAll('.view')) section.hidden = section.id !== 'view-' + view;
  for (const link of document.querySelectorAll('nav a'))
    link.classList.toggle('current', link.dataset.view === (view === 'group' || view === 'receipt' ? 'dead' : view));
  try {
    if (view === 'overview') await showOverview();
    else if (view === 'dead') await showGroups(parts[1] === 'outbox' ? 'outbox' : 'inbox');
    else if (view === 'group') await showGroup(parts[1], parts[2], false);
    else if (view === 'receipt') await showRecord(parts[1], parts[2]);
    else if (view === 'keys') await showKeys();
    else if (view === 'health') await showHealth();
    else if (view === 'actions') await showActions();
    $('#refreshed').textContent = 'updated ' + new Date().toLocaleTimeString();
    // A load error clears once loading works again; an action's message stays.
    if (state.loadFailed) status('');
    state.loadFailed = false;
  } catch (error) {
    state.loadFailed = true;
    status('could not load: ' + error.message, true);
  }
}

function showSignedIn() {
  const admin = !!(state.session && state.session.admin);
  document.body.classList.toggle('admin', admin);
  $('#login').hidden = admin || !(state.session && state.session.actions_enabled);
  $('#signed-in').hidden = !admin;
  $('#signed-in-as').textContent = admin ? 'admin: ' + state.actor : '';
}

async function loadSession() {
  state.session = await api('session');
  $('#schema').textContent = 'schema ' + state.session.schema;
  showSignedIn();
}

async function start() {
  $('#login').addEventListener('submit', async (event) => {
    event.preventDefault();
    state.token = $('#login-token').value;
    state.actor = $('#login-actor').value.trim() || 'admin';
    await loadSession();
    if (!state.session.admin) {
      state.token = '';
      status('that is not the admin token', true);
      return;
    }
    sessionStorage.setItem('boxcar.console.token', state.token);
    sessionStorage.setItem('boxcar.console.actor', state.actor);
    $('#login-token').value = '';
    status('signed in as ' + state.actor);
    await refresh();
  });
  $('#logout').addEventListener('click', async () => {
    state.token = '';
    sessionStorage.removeItem('boxcar.console.token');
    await loadSession();
    await refresh();
  });
  $('#records-more').addEventListener('click', () => showGroup(groupView.kind, groupView.group, true));
  $('#group-retry').addEventListener('click', () => act({ action: 'retry', kind: groupView.kind, group: groupView.group }));
  $('#group-discard').addEventListener('click',
    () => act({ action: 'discard', kind: groupView.kind, group: groupView.group }));
  window.addEventListener('hashchange', refresh);
  await loadSession();
  await refresh();
  state.timer = setInterval(() => {
    // A confirmation in progress keeps the page still.
    if (!$('#confirm').open) refresh();
  }, state.session.refresh_ms);
}

document.addEventListener('DOMContentLoaded', () => {
  start().catch((error) => status('could not start: ' + error.message, true));
});

// The overview: where each signer stands, what waits for approval, and
// what needs an operator (stuck transactions and other sub-states).

import { get, problemBox, query } from '../api.js';
import { $, emptyRow, fill, h, template } from '../dom.js';
import { age, eth, fromTo, localTime, since, state, txLink, when } from '../format.js';
import { callSummary } from '../intent.js';
import { pagedTable, txPage } from './list.js';

const openStates = ['INIT', 'SIMULATED', 'PENDING_APPROVAL', 'ALLOCATED', 'SIGNED', 'BROADCASTED'];
const finalStates = ['CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED'];
const columns = 8;
const refreshEvery = 15000;

/** show renders the overview into main; it returns a function that stops its timer. */
export function show(main, { live }) {
  main.append(template('t-overview'));
  let timer = null;
  const load = () => {
    signers(live);
    approvals(live);
    attention(live);
    fill($('#refreshed'), `updated ${localTime(new Date())}`);
  };
  $('#refresh').addEventListener('click', load);
  $('#attention-sub').addEventListener('change', () => attention(live));
  $('#autorefresh').addEventListener('change', (ev) => {
    clearInterval(timer);
    timer = ev.target.checked ? setInterval(() => live() && load(), refreshEvery) : null;
  });
  load();
  return () => clearInterval(timer);
}

async function signers(live) {
  const tbody = $('#signers tbody');
  let list;
  try {
    list = await get('/signers');
  } catch (err) {
    if (live()) fill(tbody, h('tr', null, h('td', { colspan: columns }, problemBox(err, 'Signers'))));
    return;
  }
  if (!live()) return;
  if (!list.signers.length) {
    fill(tbody, emptyRow(columns, 'This key may use no signer.'));
    return;
  }
  // Status needs the admin scope; each signer's answer is shown on its
  // own row, so one failure does not hide the others.
  const statuses = await Promise.allSettled(list.signers.map((s) =>
    get(`/signers/${s.chain_id}/${encodeURIComponent(s.address)}`)));
  if (!live()) return;
  fill(tbody, list.signers.map((s, i) => signerRow(s, statuses[i])));
}

function signerRow(s, result) {
  const name = `${s.chain_id}:${s.address}`;
  const who = h('td', null, h('span', { class: 'muted' }, `${s.chain_id} `), h('code', { text: s.address }));
  if (result.status === 'rejected') {
    return h('tr', { data: { signer: name } }, who, h('td', { colspan: columns - 1 }, problemBox(result.reason, 'Status')));
  }
  const st = result.value;
  const counts = st.counts || {};
  const open = openStates.filter((k) => counts[k]).map((k) =>
    h('span', { class: `chip${k === 'PENDING_APPROVAL' || k === 'BROADCASTED' ? ' hot' : ''}`, data: { state: k } }, `${k} `, h('b', { text: counts[k] })));
  const done = finalStates.filter((k) => counts[k]).map((k) =>
    h('span', { class: 'chip', data: { state: k } }, `${k} `, h('b', { text: counts[k] })));
  return h('tr', { data: { signer: name } },
    who,
    h('td', { class: 'owner' }, st.owner ? h('code', { text: st.owner }) : h('span', { class: 'warn', text: 'no owner' })),
    h('td', { class: 'num token', text: st.fencing_token }),
    h('td', { class: 'lease' }, st.lease_expires_at ? when(st.lease_expires_at) : ''),
    h('td', { class: 'num nonce', text: st.next_nonce ?? '—' }),
    h('td', null, open.length ? h('div', { class: 'chips' }, open) : h('span', { class: 'muted', text: 'none' })),
    h('td', { class: `num oldest${st.oldest_open_age_seconds > 600 ? ' warn' : ''}`, title: st.oldest_open_since || '' },
      st.oldest_open_age_seconds !== undefined ? age(st.oldest_open_age_seconds) : '—'),
    h('td', null, done.length ? h('div', { class: 'chips' }, done) : ''));
}

function approvals(live) {
  return pagedTable({
    tbody: $('#approvals tbody'), moreEl: $('#approvals-more'), columns: 5, live,
    empty: 'Nothing waits for approval.',
    fetchPage: async (cursor) => txPage(await get(`/approvals${query({ limit: 50, cursor })}`)),
    row: (tx) => h('tr', { data: { tx: tx.tx_id } },
      h('td', null, txLink(tx.tx_id)),
      h('td', null, fromTo(tx)),
      h('td', { class: 'num' }, eth(tx.value)),
      h('td', { class: 'call', text: callSummary(tx) }),
      h('td', { class: Date.parse(tx.approval_expires_at) < Date.now() ? 'bad' : '' },
        tx.approval_expires_at ? when(tx.approval_expires_at) : '')),
  });
}

function attention(live) {
  const sub = $('#attention-sub').value;
  return pagedTable({
    tbody: $('#attention tbody'), moreEl: $('#attention-more'), columns: 4, live,
    empty: `No transaction is ${sub.replace('_', ' ')}.`,
    fetchPage: async (cursor) => txPage(await get(`/tx${query({ sub_state: sub, limit: 50, cursor })}`)),
    row: (tx) => h('tr', { data: { tx: tx.tx_id } },
      h('td', null, txLink(tx.tx_id)),
      h('td', null, state(tx)),
      h('td', { class: 'num', text: tx.nonce ?? '' }),
      h('td', null, since(tx.updated_at))),
  });
}

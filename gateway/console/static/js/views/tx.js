// One transaction: its fields, its timeline (events), the operator
// actions on it, and what an operator can do in its state: while it waits
// for approvals, read what an approval covers and the txctl commands that
// approve or reject it; cancel it before it has a nonce,
// resend, bump, cancel it on chain or abandon it while it does not move
// (ALLOCATED, SIGNED, BROADCASTED and not mined; abandon before the
// broadcast only).

import { get, post, problemBox } from '../api.js';
import { $, emptyRow, facts, fill, h, template } from '../dom.js';
import { eth, gwei, json, mono, state, txLink, when } from '../format.js';
import { approveCommand, intent, intentFacts, rejectCommand } from '../intent.js';
import { busy, confirmAction, failure, notice } from '../ui.js';

const beforeNonce = ['INIT', 'SIMULATED', 'PENDING_APPROVAL'];
// How often, and how many times, the page looks again at operator actions
// not carried out yet (the owner node acts within a follower step).
const pollEvery = 2000;
const maxPolls = 30;

const attemptKinds = { initial: 'first broadcast', resend: 'sent again', fee_bump: 'fee bump', cancel: 'cancel', dropped: 'dropped by the node' };

// The operator actions, with what each does in each state it applies to.
const chainActions = {
  resend: {
    label: 'Resend…', title: 'Resend the transaction?',
    text: {
      ALLOCATED: 'Asks signerd to sign it again now, at the fees fixed with its nonce.',
      SIGNED: 'Sends its signed attempt again now, unchanged (same signature, same fees), whatever held it back.',
      BROADCASTED: 'Sends the current attempt again, unchanged (same signature, same fees).',
    },
  },
  bump: {
    label: 'Bump fees…', title: 'Bump the fees?',
    text: {
      ALLOCATED: 'Fixes its signing fees anew at the market and asks signerd to sign it again (once signerd refused it).',
      SIGNED: 'Replaces its signed attempt with a new signature at the same nonce, with both fee caps at least 10% higher and at least the market\'s, within the signer\'s caps, and sends it.',
      BROADCASTED: 'Replaces the current attempt with a new signature at the same nonce, with both fee caps at least 10% higher and at least the market\'s, within the signer\'s caps.',
    },
  },
  cancel: {
    label: 'Cancel on chain…', title: 'Cancel the transaction on chain?', danger: true,
    text: {
      ALLOCATED: 'Has signerd sign a 0-value transfer from the signer to itself at its nonce instead, where the signer\'s policy allows cancels, and sends it: the transaction ends CANCELLED once it is mined.',
      SIGNED: 'Replaces the transaction with a same-nonce 0-value transfer from the signer to itself, where the signer\'s policy allows cancels. If the cancel is mined, the transaction ends CANCELLED; if the original is mined first, it stands.',
      BROADCASTED: 'Replaces the transaction with a same-nonce 0-value transfer from the signer to itself, where the signer\'s policy allows cancels. If the cancel is mined, the transaction ends CANCELLED; if the original is mined first, it stands.',
    },
  },
  abandon: {
    label: 'Abandon…', title: 'Abandon the transaction?', danger: true,
    text: {
      ALLOCATED: 'The transaction ends FAILED (abandoned) and is never signed; its nonce goes to a new 0-value transfer from the signer to itself, signed and sent like any other, so that the signer\'s later nonces are mined. This cannot be undone.',
      SIGNED: 'The transaction ends FAILED (abandoned) and is never sent again; its nonce goes to a new 0-value transfer from the signer to itself, which replaces it there (a cancel: the signer must allow cancels), so that the signer\'s later nonces are mined. This cannot be undone.',
    },
  },
};

// Why an operator may act, by state.
const actionIntro = {
  ALLOCATED: 'Its nonce is allocated and signerd has not signed it: ask the signer\'s owner node to act on it.',
  SIGNED: 'Signed and not broadcast yet: ask the signer\'s owner node to act on it.',
  BROADCASTED: 'Broadcast and not mined yet: ask the signer\'s owner node to act on it.',
};

/** show renders the transaction id into main; it returns a function that stops polling. */
export function show(main, { live, id }) {
  main.append(template('t-tx'));
  fill($('#tx-id'), id);
  const path = `/tx/${encodeURIComponent(id)}`;
  let timer = null;
  let polls = 0;

  // act confirms, sends, reports and reloads.
  const act = async (button, ask, send, done) => {
    if (!(await confirmAction(ask)) || !live()) return;
    await busy(button, async () => {
      try {
        const answer = await send();
        if (!live()) return;
        notice(done(answer));
        polls = 0;
        await load();
      } catch (err) {
        if (live()) failure(err, ask.action);
      }
    });
  };

  const load = async () => {
    clearTimeout(timer);
    const [tx, events, actions] = await Promise.allSettled([get(path), get(`${path}/events`), get(`${path}/actions`)]);
    if (!live()) return;
    if (tx.status === 'rejected') {
      fill(main, h('div', { class: 'toolbar' }, h('h1', null, 'Transaction ', h('code', { text: id }))),
        problemBox(tx.reason, 'Reading the transaction'), h('p', null, h('a', { href: '#/', text: '← Overview' })));
      return;
    }
    const t = tx.value;
    fill($('#tx-state'), state(t), t.reason ? h('span', { class: 'muted', text: ` ${t.reason}` }) : null);
    fields(t);
    renderActions(t, act);
    timeline(events);
    const pending = oplog(actions);
    if (pending && polls < maxPolls) {
      polls++;
      timer = setTimeout(() => live() && load(), pollEvery);
    }
  };
  $('#tx-refresh').addEventListener('click', () => {
    polls = 0;
    load();
  });
  load();
  return () => clearTimeout(timer);
}

function fields(tx) {
  facts($('#tx-fields'), [
    ['State', state(tx)],
    ['Reason', tx.reason],
    ['Chain', tx.chain_id],
    ['From', mono(tx.from)],
    ['To', tx.to ? mono(tx.to) : h('em', { text: 'contract creation' })],
    ['Value', h('span', null, eth(tx.value), h('span', { class: 'muted small', text: ` (${tx.value} wei)` }))],
    ['Data', dataView(tx.data)],
    ['Gas asked', tx.gas],
    ['Gas limit', tx.gas_limit],
    ['Max fee per gas', gwei(tx.max_fee_per_gas)],
    ['Max priority fee', gwei(tx.max_priority_fee_per_gas)],
    ['Fee ceiling', gwei(tx.fee_ceiling)],
    ['Route', tx.route],
    ['Nonce', tx.nonce],
    ['Hash', mono(tx.hash)],
    ['Request id', mono(tx.request_id)],
    ['Depends on', tx.depends_on?.length ? h('span', null, ...tx.depends_on.flatMap((id, i) => (i ? [', ', txLink(id)] : [txLink(id)]))) : null],
    ['Approval wait ends', when(tx.approval_expires_at)],
    ['Created', when(tx.created_at)],
    ['Updated', when(tx.updated_at)],
    ['Metadata', tx.metadata && Object.keys(tx.metadata).length ? json(tx.metadata) : null],
  ]);
}

function dataView(data) {
  if (!data || data === '0x') return h('span', { class: 'muted', text: 'none' });
  const bytes = (data.length - 2) / 2;
  return h('details', null,
    h('summary', null, `${bytes} bytes, selector `, h('code', { text: data.slice(0, 10) })),
    mono(data));
}

function timeline(result) {
  const ol = $('#timeline');
  if (result.status === 'rejected') {
    fill(ol, h('li', null, problemBox(result.reason, 'Timeline')));
    return;
  }
  const events = result.value.events || [];
  fill(ol, events.length ? events.map(eventItem) : h('li', { class: 'muted', text: 'No events.' }));
}

function eventItem(ev) {
  const d = ev.data || {};
  const fees = d.fees || {};
  let kind;
  let what;
  let details;
  switch (ev.type) {
    case 'tx.state_changed':
      kind = 'state';
      if (!d.from_state) what = `accepted as ${d.to_state}`;
      else if (d.from_state === d.to_state) what = `${d.to_state}: ${d.sub_state ? `now ${d.sub_state}` : 'sub-state cleared'}`;
      else what = `${d.from_state} → ${d.to_state}`;
      details = [['sub-state', d.sub_state], ['reason', d.reason], ['revert reason', d.revert_reason], ['policy rule', d.rule],
        ['approvals counted', d.approvers && d.approvers.join(', ')], ['rejected by', d.approver], ['nonce', d.nonce],
        ['hash', mono(d.hash)], ['route', d.route]];
      break;
    case 'tx.attempt':
      kind = 'attempt';
      what = `attempt ${d.attempt}: ${attemptKinds[d.kind] || d.kind}`;
      details = [['nonce', d.nonce], ['hash', mono(d.hash)], ['replaces', mono(d.replaces)], ['gas limit', fees.gas_limit],
        ['max fee', gwei(fees.max_fee_per_gas)], ['priority fee', gwei(fees.max_priority_fee_per_gas)],
        ['gas price', gwei(fees.gas_price)], ['blob fee cap', gwei(fees.max_fee_per_blob_gas)], ['route', d.route], ['sent', when(d.sent_at)]];
      break;
    case 'tx.confirmation':
      kind = 'confirmation';
      what = `${d.confirmations} confirmation${d.confirmations === 1 ? '' : 's'}, ${d.receipt_status === 1 ? 'succeeded' : 'reverted'}${d.new_fork ? ', on a new fork' : ''}`;
      details = [['block', d.block_number], ['block hash', mono(d.block_hash)], ['hash', mono(d.hash)]];
      break;
    case 'tx.reorged':
      kind = 'reorged';
      what = `block left the chain: ${d.from_state} → ${d.to_state}`;
      details = [['removed block', d.block_number], ['block hash', mono(d.block_hash)], ['hash', mono(d.hash)],
        ['confirmations before', d.confirmations]];
      break;
    default:
      kind = 'event';
      what = ev.type;
      details = [['data', json(d)]];
  }
  return h('li', { class: `ev-${kind}`, data: { seq: ev.seq, type: ev.type } },
    h('div', { class: 'when' }, when(ev.created_at), h('div', { class: 'small', text: `seq ${ev.seq}` })),
    h('div', null, h('span', { class: 'kind', text: kind }), h('span', { class: 'what', text: what }),
      facts(h('dl', { class: 'facts' }), details)));
}

// oplog fills the operator actions and reports whether one is pending.
function oplog(result) {
  const tbody = $('#tx-oplog tbody');
  if (result.status === 'rejected') {
    fill(tbody, h('tr', null, h('td', { colspan: 5 }, problemBox(result.reason, 'Operator actions'))));
    return false;
  }
  const actions = result.value.actions || [];
  fill(tbody, actions.length ? actions.map((a) => h('tr', { data: { action: a.action_id, kind: a.action } },
    h('td', null, when(a.requested_at)),
    h('td', { text: a.action }),
    h('td', { text: a.operator }),
    h('td', { class: a.outcome === 'refused' ? 'bad' : '' },
      a.outcome ? `${a.outcome}${a.detail ? `: ${a.detail}` : ''}` : h('span', { class: 'warn', text: 'pending…' }),
      a.filler_tx_id ? h('span', { class: 'small' }, ' — its nonce went to ', txLink(a.filler_tx_id)) : null),
    h('td', { class: 'num', text: a.attempt ?? '' })))
    : emptyRow(5, 'No operator action.'));
  return actions.some((a) => !a.outcome);
}

function renderActions(tx, act) {
  const body = $('#tx-actions-body');
  body.replaceChildren();
  const txPath = `/tx/${encodeURIComponent(tx.tx_id)}`;
  const who = [['Transaction', mono(tx.tx_id)], ['From', mono(tx.from)], ['Nonce', tx.nonce], ['Current hash', mono(tx.hash)]];

  // A mined transaction (included, confirming) has nothing left to act on.
  if (actionIntro[tx.state] && tx.sub_state !== 'included') {
    const row = h('div', { class: 'actions-row' });
    for (const [name, a] of Object.entries(chainActions)) {
      const text = a.text[tx.state];
      if (!text) continue;
      const b = h('button', { type: 'button', class: a.danger ? 'danger' : 'ghost', id: `action-${name}`, text: a.label });
      b.addEventListener('click', () => act(b,
        { title: a.title, text, details: who, action: a.label.replace('…', ''), danger: a.danger },
        () => post(`${txPath}/actions`, { action: name }),
        (r) => `${name} requested (action ${r.action_id}); the signer's owner node carries it out, see Operator actions.`));
      row.append(b);
    }
    body.append(h('p', { class: 'muted small', text: actionIntro[tx.state] }), row);
  }

  if (beforeNonce.includes(tx.state)) {
    const b = h('button', { type: 'button', class: 'danger', id: 'cancel-tx', text: 'Cancel transaction…' });
    b.addEventListener('click', () => act(b,
      { title: 'Cancel the transaction?', text: 'It has no nonce yet: it ends CANCELLED (cancel_requested) and is never signed.',
        details: who.slice(0, 2), action: 'Cancel transaction', danger: true },
      () => post(`${txPath}/cancel`),
      (r) => `Transaction ${r.tx_id} is ${r.state}.`));
    body.append(h('div', { class: 'actions-row' }, b,
      h('span', { class: 'muted small', text: 'before a nonce is assigned' })));
  }

  if (tx.state === 'PENDING_APPROVAL') body.append(approvalPanel(tx));

  if (!body.childNodes.length) {
    body.append(h('p', { class: 'muted', text: `No action applies to a ${tx.state} transaction.` }));
  }
}

// approvalPanel shows what an approval of tx covers and the commands an
// approver runs on their own machine: approver keys never enter this page.
function approvalPanel(tx) {
  const panel = template('t-approval');
  const intentOut = h('code', { class: 'hex', id: 'approval-intent-hash', text: '…' });
  facts($('#approval-intent', panel), intentFacts(tx, intentOut));
  intent(tx).then((hash) => fill(intentOut, hash), (err) => fill(intentOut, h('span', { class: 'bad', text: err.message })));
  const approve = approveCommand(tx);
  const reject = rejectCommand(tx);
  if (!approve || !reject) {
    fill($('.approval', panel), h('p', { class: 'bad', text: 'The transaction id is not a UUID: no command is shown for it.' }));
    return panel;
  }
  fill($('#approve-command', panel), approve);
  fill($('#reject-command', panel), reject);
  return panel;
}

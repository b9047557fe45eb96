// One transaction: its fields, its timeline (events), the operator
// actions on it, and what an operator can do in its state: approve or
// reject while it waits for approvals, cancel it before it has a nonce,
// resend, bump, cancel it on chain or abandon it while it does not move
// (ALLOCATED, SIGNED, BROADCASTED and not mined; abandon before the
// broadcast only).

import { get, post, problemBox } from '../api.js';
import { approver, feeCeiling, forgetApprover, hex, intent, loadApproverKey, rfc3339, signApproval } from '../approval.js';
import { $, emptyRow, facts, fill, h, template } from '../dom.js';
import { eth, gwei, json, mono, state, txLink, when } from '../format.js';
import { busy, confirmAction, failure, notice } from '../ui.js';

const beforeNonce = ['INIT', 'SIMULATED', 'PENDING_APPROVAL'];
const approverID = /^[A-Za-z0-9._@-]{1,64}$/;
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
    ['Depends on', tx.depends_on ? txLink(tx.depends_on) : null],
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

  if (tx.state === 'PENDING_APPROVAL') body.append(approvePanel(tx, act));

  if (!body.childNodes.length) {
    body.append(h('p', { class: 'muted', text: `No action applies to a ${tx.state} transaction.` }));
  }
}

function approvePanel(tx, act) {
  const panel = template('t-approve');
  const el = (id) => $(`#${id}`, panel);
  const file = el('approver-file');
  const paste = el('approver-paste');
  const loadBox = el('approver-load');
  const loadedBox = el('approver-loaded');
  const ttl = el('approve-ttl');
  const maxFee = el('approve-max-fee');
  const maxFeeGwei = el('approve-max-fee-gwei');
  const intentOut = el('approve-intent');
  const rejectAs = el('reject-approver');
  const approveButton = el('approve');
  const rejectButton = el('reject');
  const errors = h('div');
  loadBox.after(errors);

  const showLoaded = () => {
    const a = approver();
    loadBox.hidden = Boolean(a);
    loadedBox.hidden = !a;
    approveButton.disabled = !a;
    if (a) {
      fill($('#approver-id', loadedBox), a.id);
      fill($('#approver-pub', loadedBox), a.publicKey);
      if (!rejectAs.value) rejectAs.value = a.id;
    }
  };
  const showIntent = async () => {
    try {
      fill(intentOut, hex(await intent(tx, tx.type)));
    } catch (err) {
      fill(intentOut, h('span', { class: 'bad', text: err.message }));
    }
  };

  // The fee ceiling offered is the transaction's fee_ceiling: the most
  // txmanager may sign it for, fee bumps included. Without one the
  // approver chooses.
  maxFee.value = tx.fee_ceiling || '';
  const showMaxFee = () => {
    let shown;
    try {
      shown = gwei(feeCeiling(maxFee.value));
    } catch {
      shown = h('span', { class: 'muted', text: maxFee.value ? 'not a decimal amount of wei' : '' });
    }
    fill(maxFeeGwei, shown);
  };
  maxFee.addEventListener('input', showMaxFee);
  showMaxFee();

  el('approver-load-button').addEventListener('click', async () => {
    errors.replaceChildren();
    try {
      const text = paste.value.trim() || (file.files.length ? (await file.files[0].text()).trim() : '');
      if (!text) throw new Error('choose the approver key file or paste it');
      await loadApproverKey(text);
    } catch (err) {
      errors.append(problemBox(err, 'Approver key'));
    } finally {
      // The key's text is not kept anywhere the page can reach again.
      paste.value = '';
      file.value = '';
    }
    showLoaded();
  });
  el('approver-forget').addEventListener('click', () => {
    forgetApprover();
    rejectAs.value = '';
    showLoaded();
  });

  approveButton.addEventListener('click', async () => {
    errors.replaceChildren();
    const a = approver();
    if (!a) return;
    const expiry = Math.floor(Date.now() / 1000) + Number(ttl.value);
    let intentHex, ceiling;
    try {
      ceiling = feeCeiling(maxFee.value);
    } catch (err) {
      errors.append(problemBox(err, 'Fee ceiling'));
      return;
    }
    try {
      intentHex = hex(await intent(tx, tx.type));
    } catch (err) {
      errors.append(problemBox(err, 'Intent'));
      return;
    }
    await act(approveButton,
      { title: `Approve as ${a.id}?`,
        text: 'Signs the approval message of this intent with the loaded key. Read what you approve:',
        details: [['Transaction', mono(tx.tx_id)], ['Chain', tx.chain_id], ['From', mono(tx.from)],
          ['To', tx.to ? mono(tx.to) : 'contract creation'], ['Value', h('span', null, eth(tx.value), ` (${tx.value} wei)`)],
          ['Data', tx.data && tx.data !== '0x' ? `${(tx.data.length - 2) / 2} bytes` : 'none'], ['Type', tx.type],
          ['Intent', mono(intentHex)],
          ['Fee ceiling', h('span', null, gwei(ceiling), ` (${ceiling} wei per gas; a fee bump above it needs a new approval)`)],
          ['Valid until', rfc3339(expiry)]],
        action: 'Sign and approve' },
      async () => post(`/tx/${encodeURIComponent(tx.tx_id)}/approvals`, await signApproval(tx, tx.type, ceiling, expiry)),
      () => `Approval by ${a.id} recorded, valid until ${rfc3339(expiry)}; signerd counts it against the policy at the owner node's next step.`);
  });

  rejectButton.addEventListener('click', () => {
    errors.replaceChildren();
    const id = rejectAs.value.trim();
    if (!approverID.test(id)) {
      errors.append(problemBox(new Error('give the approver id to reject as (letters, digits, ".", "_", "-" or "@")'), 'Reject'));
      return;
    }
    act(rejectButton,
      { title: `Reject as ${id}?`, text: 'The transaction FAILS (approval_rejected); no nonce was spent on it. This cannot be undone.',
        details: [['Transaction', mono(tx.tx_id)], ['From', mono(tx.from)], ['To', tx.to ? mono(tx.to) : 'contract creation'],
          ['Value', eth(tx.value)]],
        action: 'Reject', danger: true },
      () => post(`/tx/${encodeURIComponent(tx.tx_id)}/reject`, { approver: id }),
      (r) => `Rejected by ${id}: the transaction is ${r.state}.`);
  });

  showLoaded();
  showIntent();
  return panel;
}

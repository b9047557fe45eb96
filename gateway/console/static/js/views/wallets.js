// Wallets: one of the tenant's signers on one chain, its wallet balance in
// each asset (now, or as of a block) from the ledger, and the statement of
// one of those wallets: its entries with the running balance, a page at a
// time. The route names the signer (#/wallets/<chain_id>:<address>), so
// the view survives a reload.

import { get, problemBox, query } from '../api.js';
import { $, emptyRow, fill, h, template } from '../dom.js';
import { short, units } from '../format.js';
import { pagedTable } from './list.js';

const signerName = /^([0-9]{1,19}):(0x[0-9a-fA-F]{40})$/;

/** show renders the wallets of the signer the route names (the first one when none) into main. */
export function show(main, { live, me, id }) {
  main.append(template('t-wallets'));
  render(live, me, id);
}

async function render(live, me, id) {
  const signers = await signerList(me);
  if (!live()) return;
  const select = $('#wallets-signer');
  if (signers.error) {
    fill($('#wallet-balances tbody'), h('tr', null, h('td', { colspan: 4 }, problemBox(signers.error, 'Signers'))));
    return;
  }
  if (!signers.list.length) {
    fill($('#wallet-balances tbody'), emptyRow(4, 'This key may use no signer.'));
    return;
  }
  const wanted = signerName.exec(id || '');
  let current = signers.list[0];
  if (wanted) current = { chain_id: wanted[1], address: wanted[2] };
  const names = signers.list.map((s) => `${s.chain_id}:${s.address}`);
  const currentName = `${current.chain_id}:${current.address}`;
  // A signer named by the route but not in the list (another tenant's)
  // is still asked for: the gateway answers what this key may see.
  const options = names.some((n) => n.toLowerCase() === currentName.toLowerCase()) ? names : [currentName, ...names];
  fill(select, options.map((n) => h('option', { value: n, text: n })));
  select.value = options.find((n) => n.toLowerCase() === currentName.toLowerCase());
  select.addEventListener('change', () => {
    location.hash = `#/wallets/${select.value}`;
  });
  const load = () => balances(current, $('#wallets-at-block').value.trim(), live);
  $('#wallets-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    load();
  });
  $('#wallets-refresh').addEventListener('click', load);
  load();
}

// signerList is the signers the key may use: GET /signers (scope
// tx:read), else the key's own list when it has one.
async function signerList(me) {
  try {
    return { list: (await get('/signers')).signers };
  } catch (err) {
    const own = (me.key.signers || []).map((s) => signerName.exec(s)).filter(Boolean);
    if (own.length) return { list: own.map((m) => ({ chain_id: m[1], address: m[2] })) };
    return { error: err };
  }
}

async function balances(signer, atBlock, live) {
  const tbody = $('#wallet-balances tbody');
  fill($('#wallet-statement tbody'));
  fill($('#wallet-statement-more'));
  fill($('#wallet-statement-title'), 'Statement');
  let list;
  try {
    list = await get(`/ledger/accounts${query({ chain_id: signer.chain_id, address: signer.address, at_block: atBlock, limit: 1000 })}`);
  } catch (err) {
    if (live()) fill(tbody, h('tr', null, h('td', { colspan: 4 }, problemBox(err, 'Balances'))));
    return;
  }
  if (!live()) return;
  const accounts = list.accounts || [];
  if (!accounts.length) {
    fill(tbody, emptyRow(4, 'The ledger has booked nothing for this signer yet.'));
    return;
  }
  const rows = accounts.map((a) => {
    const pick = h('button', { type: 'button', class: 'ghost small', text: 'Statement', data: { account: a.account_id } });
    pick.addEventListener('click', () => statement(a, live));
    return h('tr', { data: { asset: a.asset, account: a.account_id } },
      h('td', { class: 'asset' }, assetName(a.asset)),
      h('td', { class: 'num balance' }, amount(a.asset, a.balance)),
      h('td', { class: 'num muted small' }, a.as_of_block !== undefined ? `as of block ${a.as_of_block}` : `version ${a.version}`),
      h('td', null, pick));
  });
  fill(tbody, rows);
  statement(accounts.find((a) => a.asset === 'native') || accounts[0], live);
}

function statement(account, live) {
  fill($('#wallet-statement-title'), 'Statement of the ', assetName(account.asset), ' wallet');
  for (const tr of document.querySelectorAll('#wallet-balances tr[data-account]')) {
    tr.classList.toggle('selected', tr.dataset.account === String(account.account_id));
  }
  return pagedTable({
    tbody: $('#wallet-statement tbody'), moreEl: $('#wallet-statement-more'), columns: 6, live,
    empty: 'No entry yet.',
    fetchPage: async (cursor) => {
      const page = await get(`/ledger/accounts/${account.account_id}/entries${query({ limit: 50, cursor })}`);
      return { items: page.entries || [], next: page.next_cursor || null };
    },
    row: (e) => h('tr', { data: { entry: e.entry_id, journal: e.journal_id } },
      h('td', { class: 'num muted', text: e.entry_id }),
      h('td', null, h('span', { class: `badge j-${e.journal_kind}`, text: e.journal_kind }),
        h('span', { class: 'muted small', text: ` #${e.journal_id}` }),
        e.reverses ? h('span', { class: 'muted small', text: ` reverses #${e.reverses}` }) : null),
      h('td', null, e.tx_hash ? short(e.tx_hash, 10, 6) : ''),
      h('td', { class: 'num', text: e.block_number ?? '' }),
      h('td', { class: `num amount${e.amount.startsWith('-') ? ' bad' : ''}` }, amount(account.asset, e.amount)),
      h('td', { class: 'num balance' }, amount(account.asset, e.balance))),
  });
}

function assetName(asset) {
  return asset === 'native' ? h('span', { text: 'ETH (native)' }) : short(asset, 6, 4);
}

// amount shows a ledger amount exactly: native in ether with the wei in the
// title; a token in its smallest unit (the ledger knows no decimals).
function amount(asset, value) {
  if (asset === 'native') return h('span', { title: `${value} wei` }, `${units(value, 18)} ETH`);
  return h('span', { title: `${value} of ${asset}`, text: value });
}

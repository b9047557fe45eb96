// The tenant's transactions, newest first, optionally of one state.

import { get, query } from '../api.js';
import { $, h, template } from '../dom.js';
import { eth, fromTo, state, txLink, when } from '../format.js';
import { pagedTable, txPage } from './list.js';

/** show renders the list into main. */
export function show(main, { live }) {
  main.append(template('t-txs'));
  const load = () => {
    const st = $('#txs-state').value;
    pagedTable({
      tbody: $('#txs tbody'), moreEl: $('#txs-more'), columns: 6, live,
      empty: st ? `No ${st} transaction.` : 'No transaction yet.',
      fetchPage: async (cursor) => txPage(await get(`/tx${query({ state: st, limit: 50, cursor })}`)),
      row: (tx) => h('tr', { data: { tx: tx.tx_id } },
        h('td', null, txLink(tx.tx_id)),
        h('td', null, state(tx)),
        h('td', null, fromTo(tx)),
        h('td', { class: 'num' }, eth(tx.value)),
        h('td', { class: 'num', text: tx.nonce ?? '' }),
        h('td', null, when(tx.created_at))),
    });
  };
  $('#txs-state').addEventListener('change', load);
  $('#txs-refresh').addEventListener('click', load);
  load();
}

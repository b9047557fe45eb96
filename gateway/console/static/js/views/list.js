// A table filled page by page from a list endpoint (TxList and the like:
// items plus next_cursor).

import { problemBox } from '../api.js';
import { emptyRow, fill, h } from '../dom.js';

/**
 * pagedTable loads the first page into tbody and offers "Load more" in
 * moreEl while the list has a next_cursor.
 *   fetchPage(cursor) resolves to {items, next};
 *   row(item) makes a <tr>;
 *   live() is false once the page was left.
 */
export async function pagedTable({ tbody, moreEl, columns, fetchPage, row, empty, live }) {
  moreEl.replaceChildren();
  let page;
  try {
    page = await fetchPage(undefined);
  } catch (err) {
    if (live()) fill(tbody, h('tr', null, h('td', { colspan: columns }, problemBox(err))));
    return;
  }
  if (!live()) return;
  fill(tbody, page.items.length ? page.items.map(row) : emptyRow(columns, empty));
  let next = page.next;
  const more = h('button', { type: 'button', class: 'ghost small', text: 'Load more' });
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const p = await fetchPage(next);
      if (!live()) return;
      tbody.append(...p.items.map(row));
      next = p.next;
      more.hidden = !next;
    } catch (err) {
      if (live()) moreEl.append(problemBox(err));
    } finally {
      more.disabled = false;
    }
  });
  more.hidden = !next;
  moreEl.append(more);
}

/** txPage adapts a TxList answer for pagedTable. */
export function txPage(list) {
  return { items: list.transactions || [], next: list.next_cursor || null };
}

// DOM building. Every piece of data reaches the page as a text node or an
// attribute value set through the DOM, never as markup: nothing the API
// returns can become HTML, script or style.

/**
 * h makes an element. props may hold: class (string), text (string),
 * title, href, id, hidden, disabled, type, value, data (an object of
 * data-* attributes) and any other plain attribute. Event handler and
 * style attributes are refused: handlers are added with addEventListener,
 * style lives in console.css. Children are nodes, strings (text nodes),
 * arrays of them, or null/undefined/false (skipped).
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k) || k === 'style') throw new Error(`h: attribute ${k} is not allowed`);
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'data') for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
    else if (k === 'hidden' || k === 'disabled') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** append adds children (see h) to el. */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** fill replaces el's children (see h). */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** template clones the <template> with the id. */
export function template(id) {
  const t = document.getElementById(id);
  return t.content.cloneNode(true);
}

/** $ finds one element under root (the document by default). */
export function $(selector, root = document) {
  return root.querySelector(selector);
}

/** facts fills a <dl> from [term, value] pairs; values as for h's children. */
export function facts(dl, pairs) {
  dl.replaceChildren();
  for (const [term, value] of pairs) {
    if (value === undefined || value === null || value === '') continue;
    dl.append(h('dt', { text: term }), append(h('dd'), [value]));
  }
  return dl;
}

/** emptyRow is a table row saying there is nothing to list. */
export function emptyRow(columns, text) {
  return h('tr', null, h('td', { class: 'empty', colspan: columns, text }));
}

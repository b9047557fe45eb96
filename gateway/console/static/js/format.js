// Formatting of the API's values for people. Amounts are uint256 decimal
// strings and stay BigInt: a float would round them.

import { h } from './dom.js';

/** units formats a decimal integer string scaled down by 10^decimals. */
export function units(value, decimals) {
  if (value === undefined || value === null || value === '') return '';
  let v;
  try {
    v = BigInt(value);
  } catch {
    return String(value);
  }
  if (v < 0n) return `-${units((-v).toString(), decimals)}`;
  const base = 10n ** BigInt(decimals);
  const whole = v / base;
  let frac = (v % base).toString().padStart(decimals, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : `${whole}`;
}

/** eth shows wei as ether, with the exact wei in the title. */
export function eth(wei) {
  if (wei === undefined || wei === null) return '';
  return h('span', { title: `${wei} wei` }, `${units(wei, 18)} ETH`);
}

/** gwei shows a fee in gwei, with the exact wei in the title. */
export function gwei(wei) {
  if (wei === undefined || wei === null) return '';
  return h('span', { title: `${wei} wei` }, `${units(wei, 9)} gwei`);
}

/** short abbreviates a hex string or id, keeping the whole of it in the title. */
export function short(s, head = 8, tail = 6) {
  if (!s) return '';
  const text = s.length > head + tail + 1 ? `${s.slice(0, head)}…${s.slice(-tail)}` : s;
  return h('code', { title: s }, text);
}

/** mono shows a value in full, in monospace. */
export function mono(s) {
  if (s === undefined || s === null || s === '') return '';
  return h('code', { class: 'hex' }, String(s));
}

/** when shows a timestamp in local time, with the ISO form in the title. */
export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return h('time', { datetime: iso, title: iso }, localTime(d));
}

/** localTime is YYYY-MM-DD HH:MM:SS in the browser's time zone. */
export function localTime(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** age formats seconds compactly: 42s, 3m 12s, 5h 02m, 2d 04h. */
export function age(seconds) {
  if (seconds === undefined || seconds === null || Number.isNaN(seconds)) return '';
  const s = Math.max(0, Math.floor(seconds));
  const p = (n) => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${p(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${p(Math.floor(s % 3600 / 60))}m`;
  return `${Math.floor(s / 86400)}d ${p(Math.floor(s % 86400 / 3600))}h`;
}

/** since is the age of a timestamp, for lists. */
export function since(iso) {
  if (!iso) return '';
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  return h('time', { datetime: iso, title: iso }, `${age((Date.now() - t) / 1000)} ago`);
}

/** state is a transaction's state badge, with its sub-state. */
export function state(tx) {
  return h('span', { class: 'state' },
    h('span', { class: `badge s-${tx.state}`, text: tx.state }),
    tx.sub_state ? h('span', { class: `badge sub sub-${tx.sub_state}`, text: tx.sub_state }) : null);
}

/** txLink links to a transaction's page. */
export function txLink(id) {
  return h('a', { href: `#/tx/${encodeURIComponent(id)}`, class: 'txid', title: id, data: { tx: id } }, `${id.slice(0, 8)}…${id.slice(-4)}`);
}

/** fromTo shows a transfer's sender and destination compactly. */
export function fromTo(tx) {
  return h('span', null, short(tx.from, 6, 4), ' → ', tx.to ? short(tx.to, 6, 4) : h('em', { text: 'creation' }));
}

/** json shows a JSON value indented. */
export function json(v) {
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}

// The public API, called from this origin with the operator's API key.
// The key lives in sessionStorage only: it ends with the tab, is not
// shared with other tabs, and is never put in a URL or a cookie.

import { h } from './dom.js';

const keyName = 'txfence.console.apiKey';

/** apiKey is the signed-in key, or null. */
export function apiKey() {
  return sessionStorage.getItem(keyName);
}

/** setApiKey keeps the key for this tab's session. */
export function setApiKey(key) {
  sessionStorage.setItem(keyName, key);
}

/** clearApiKey signs out. */
export function clearApiKey() {
  sessionStorage.removeItem(keyName);
}

/** ApiError is a failed call: the HTTP status and its problem document. */
export class ApiError extends Error {
  constructor(status, problem, retryAfter) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
}

// Listeners told when the gateway refuses the key (401), wherever that
// happens: the console then returns to sign-in.
const unauthorized = new Set();

/** onUnauthorized registers fn(ApiError) for 401 answers. */
export function onUnauthorized(fn) {
  unauthorized.add(fn);
}

/**
 * call sends a request to /api/v1 and returns the decoded JSON answer.
 * A non-2xx answer throws an ApiError carrying the problem document (or
 * one made up from the status when a proxy answered with something else).
 */
export async function call(method, path, body) {
  const key = apiKey();
  const headers = { Accept: 'application/json, application/problem+json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
    });
  } catch (err) {
    throw new ApiError(0, { title: 'Network error', detail: `the gateway could not be reached: ${err.message}` });
  }
  const text = await resp.text();
  let doc = null;
  if (text) {
    try {
      doc = parseJSON(text);
    } catch {
      doc = null;
    }
  }
  if (resp.ok) return doc;
  const problem = doc && typeof doc === 'object' && (doc.title || doc.detail)
    ? doc
    : { title: resp.statusText || `HTTP ${resp.status}`, status: resp.status, detail: text.slice(0, 300) };
  const err = new ApiError(resp.status, problem, resp.headers.get('Retry-After'));
  if (resp.status === 401) for (const fn of unauthorized) fn(err);
  throw err;
}

// parseJSON keeps integers beyond 2^53 exact (a client's metadata may
// hold them, and the gateway passes them on unchanged): they become raw
// JSON values, which JSON.stringify writes back digit for digit.
function parseJSON(text) {
  if (typeof JSON.rawJSON !== 'function') return JSON.parse(text);
  return JSON.parse(text, (key, value, context) =>
    (typeof value === 'number' && !Number.isSafeInteger(value) && context && /^-?[0-9]+$/.test(context.source)
      ? JSON.rawJSON(context.source)
      : value));
}

/** get is call('GET', ...). */
export function get(path) {
  return call('GET', path);
}

/** post is call('POST', ...). */
export function post(path, body) {
  return call('POST', path, body);
}

/** query builds a query string from the defined, non-empty members of params. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// What each status means for the operator, beside the problem's detail.
const hints = {
  401: 'The gateway refused the API key: sign in again.',
  403: 'The key is valid but may not do this.',
  404: 'Not found, or not visible to this key.',
  409: 'Refused in the transaction\'s current state.',
  429: 'Rate limited.',
  503: 'A service behind the gateway is unavailable; try again shortly.',
};

/**
 * problemBox shows an error readably: the problem's title and status,
 * its detail, each invalid field, what the status means, and the request
 * id that finds the gateway's log lines.
 */
export function problemBox(err, what) {
  if (!(err instanceof ApiError)) {
    return h('div', { class: 'problem', role: 'alert' },
      h('div', { class: 'title' }, what ? `${what}: ` : '', err && err.message ? err.message : String(err)));
  }
  const p = err.problem;
  const head = [what ? `${what}: ` : '', p.title || 'Error', err.status ? ` (${err.status})` : ''].join('');
  const fields = Array.isArray(p.errors) && p.errors.length
    ? h('ul', null, p.errors.map((e) => h('li', null, h('code', { text: e.pointer || '' }), ' ', e.detail || '')))
    : null;
  const hint = hints[err.status];
  const retry = err.retryAfter ? ` Retry after ${err.retryAfter} s.` : '';
  return h('div', { class: 'problem', role: 'alert', data: { status: err.status } },
    h('div', { class: 'title', text: head }),
    p.detail ? h('div', { class: 'detail', text: p.detail }) : null,
    fields,
    hint || retry ? h('div', { class: 'hint', text: `${hint || ''}${retry}` }) : null,
    p.request_id ? h('div', { class: 'rid', text: `request id ${p.request_id}` }) : null);
}

// The console's shell: sign-in and sign-out, the header, and a hash router
// (#/, #/tx, #/tx/<id>, #/wallets, #/wallets/<chain_id>:<address>) so that
// every page is one static document and a link to a transaction works
// after a reload.

import { apiKey, clearApiKey, get, onUnauthorized, problemBox, setApiKey } from './api.js';
import { $, fill, template } from './dom.js';
import { clearFlash } from './ui.js';
import * as overview from './views/overview.js';
import * as txs from './views/txs.js';
import * as txView from './views/tx.js';
import * as wallets from './views/wallets.js';

// The scopes the console's pages use; a key without one of them still
// signs in, and the header says what it cannot do.
const consoleScopes = ['admin', 'approvals', 'tx:read', 'tx:write', 'ledger:read'];

let me = null; // GET /me of the signed-in key
let generation = 0; // bumped on every render, so late answers of a left page are dropped
let stopView = null; // stops the current view's timers

function parseRoute() {
  const path = (location.hash || '#/').slice(1);
  const m = /^\/tx\/([^/?#]+)$/.exec(path);
  if (m) return { view: txView, name: 'tx', id: decodeURIComponent(m[1]) };
  if (path === '/tx') return { view: txs, name: 'txs' };
  const w = /^\/wallets(?:\/([^/?#]+))?$/.exec(path);
  if (w) return { view: wallets, name: 'wallets', id: w[1] ? decodeURIComponent(w[1]) : undefined };
  return { view: overview, name: 'overview' };
}

function showHeader(signedIn) {
  for (const id of ['nav', 'goto', 'who', 'signout']) $(`#${id}`).hidden = !signedIn;
  if (!signedIn) return;
  fill($('#who-tenant'), me.tenant_name);
  fill($('#who-key'), `key ${me.key.name} · ${me.key.scopes.join(' ')}`);
  const missing = consoleScopes.filter((s) => !me.key.scopes.includes(s));
  fill($('#who-warn'), missing.length ? `lacks ${missing.join(', ')}` : '');
  $('#who-warn').title = missing.length ? 'Pages and actions that need these scopes answer 403 with this key.' : '';
}

function markNav(name) {
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.route === name);
}

function stop() {
  generation++;
  if (stopView) stopView();
  stopView = null;
}

function signOut() {
  stop();
  clearApiKey();
  me = null;
}

function showSignin(err) {
  stop();
  showHeader(false);
  const main = $('#main');
  fill(main, template('t-signin'));
  if (err) fill($('#signin-error'), problemBox(err, 'Sign-in'));
  const form = $('#signin-form');
  const input = $('#signin-key');
  input.focus();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    $('#signin-submit').disabled = true;
    setApiKey(key);
    input.value = '';
    try {
      me = await get('/me');
    } catch (e) {
      // A refused key (401) already brought the sign-in back with the
      // problem shown; anything else is shown here.
      if (e.status !== 401) {
        clearApiKey();
        fill($('#signin-error'), problemBox(e, 'Sign-in'));
        $('#signin-submit').disabled = false;
      }
      return;
    }
    clearFlash();
    render();
  });
}

async function render() {
  stop();
  const gen = generation;
  const live = () => gen === generation;
  if (!apiKey()) {
    showSignin();
    return;
  }
  const main = $('#main');
  if (!me) {
    try {
      me = await get('/me');
    } catch (err) {
      if (err.status !== 401 && live()) fill(main, problemBox(err, 'Reading the key'));
      return;
    }
    if (!live()) return;
  }
  showHeader(true);
  const route = parseRoute();
  markNav(route.name);
  main.replaceChildren();
  stopView = route.view.show(main, { live, me, id: route.id }) || null;
}

onUnauthorized((err) => {
  signOut();
  showSignin(err);
});

$('#signout').addEventListener('click', () => {
  signOut();
  clearFlash();
  history.replaceState(null, '', '#/');
  showSignin();
});

$('#goto').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const id = $('#goto-id').value.trim();
  if (!id) return;
  $('#goto-id').value = '';
  location.hash = `#/tx/${encodeURIComponent(id)}`;
});

window.addEventListener('hashchange', () => {
  clearFlash();
  render();
});

render();

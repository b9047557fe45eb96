// Page-wide pieces: the confirmation dialog and the flash area.

import { $, facts, fill, h } from './dom.js';
import { problemBox } from './api.js';

/**
 * confirmAction asks before an action that changes something: a modal
 * dialog with what will be done (title, text, [term, value] facts) and a
 * button named after the action. It resolves true only on that button.
 */
export function confirmAction({ title, text, details = [], action, danger = false }) {
  const dialog = $('#confirm');
  fill($('#confirm-title', dialog), title);
  fill($('#confirm-text', dialog), text || '');
  facts($('#confirm-facts', dialog), details);
  const yes = $('#confirm-yes', dialog);
  const no = $('#confirm-no', dialog);
  yes.textContent = action;
  yes.className = danger ? 'danger' : '';
  return new Promise((resolve) => {
    const done = (answer) => {
      yes.removeEventListener('click', onYes);
      no.removeEventListener('click', onNo);
      dialog.removeEventListener('cancel', onNo);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onYes = () => done(true);
    const onNo = () => done(false);
    yes.addEventListener('click', onYes);
    no.addEventListener('click', onNo);
    dialog.addEventListener('cancel', onNo);
    dialog.showModal();
    no.focus();
  });
}

/** notice shows a success message at the top of the page. */
export function notice(text) {
  fill($('#flash'), h('div', { class: 'notice', text }));
}

/** failure shows an error at the top of the page. */
export function failure(err, what) {
  fill($('#flash'), problemBox(err, what));
}

/** clearFlash removes the messages. */
export function clearFlash() {
  $('#flash').replaceChildren();
}

/** busy disables button while fn runs, so an action is not sent twice. */
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}

// What an approval of a transaction covers, shown read-only. Approvers
// sign with `txctl approve` on their own machine, which prints the same
// facts before it asks; no approver key ever enters this page.
//
// Call data is read the way the signer's policy reads it
// (signer-zonec/policy/calldata.go, policy.ReadCall): the Solidity ABI's
// canonical encoding only, every offset exactly where the previous value
// ended, every length exact, padding and upper bytes zero, bools 0 or 1,
// nothing after the end. Anything else is shown as malformed, never as the
// call it resembles, since the policy refuses it. This is a port of that
// decoder: the browser test holds it to policy.ReadCall, reading for
// reading, on valid and damaged call data of every call both know, and
// checks that they know the same calls.

import { h } from './dom.js';
import { eth, gwei, mono } from './format.js';

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const address = /^0x[0-9a-fA-F]{40}$/;
const hexData = /^0x([0-9a-fA-F]{2})*$/;
const uint256 = /^(0|[1-9][0-9]{0,77})$/;
const zeroAddress = `0x${'0'.repeat(40)}`;

/** hex encodes bytes as 0x-prefixed lowercase hex. */
export function hex(bytes) {
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** fromHex decodes 0x-prefixed hex of even length; null if it is not. */
export function fromHex(s) {
  if (typeof s !== 'string' || !hexData.test(s)) return null;
  const out = new Uint8Array((s.length - 2) / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 + 2 * i, 4 + 2 * i), 16);
  return out;
}

// --- The ABI types policy reads: address, bool, uintN, bytesN, bytes, T[], tuples.

function parseTypes(s) {
  if (s === '') return [];
  const out = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= s.length; i++) {
    if (i < s.length) {
      if (s[i] === '(') depth++;
      else if (s[i] === ')') depth--;
      if (s[i] !== ',' || depth > 0) continue;
    }
    out.push(parseType(s.slice(start, i)));
    start = i + 1;
  }
  return out;
}

// The signatures are constants of this module: a type it cannot parse is
// a bug, which fails every test.
function parseType(s) {
  if (s.endsWith('[]')) return { kind: 'array', elem: parseType(s.slice(0, -2)) };
  if (s.startsWith('(') && s.endsWith(')')) return { kind: 'tuple', fields: parseTypes(s.slice(1, -1)) };
  if (s === 'address' || s === 'bool' || s === 'bytes') return { kind: s };
  let m = /^uint([0-9]+)$/.exec(s);
  if (m) return { kind: 'uint', size: Number(m[1]) / 8 };
  m = /^bytes([0-9]+)$/.exec(s);
  if (m) return { kind: 'fixed', size: Number(m[1]) };
  throw new Error(`intent.js: type ${s} is not one it reads`);
}

const dynamic = (t) => t.kind === 'bytes' || t.kind === 'array' || (t.kind === 'tuple' && t.fields.some(dynamic));
const headSize = (t) => (t.kind !== 'tuple' || dynamic(t) ? 32 : t.fields.reduce((n, f) => n + headSize(f), 0));
const allZero = (b) => b.every((x) => x === 0);

function typeName(t) {
  switch (t.kind) {
    case 'uint': return `uint${8 * t.size}`;
    case 'fixed': return `bytes${t.size}`;
    case 'array': return `${typeName(t.elem)}[]`;
    case 'tuple': return `(${t.fields.map(typeName).join(',')})`;
    default: return t.kind;
  }
}

// --- The canonical decoder (calldata.go's decodeArgs and what it calls).

function decodeArgs(types, args) {
  const head = types.reduce((n, t) => n + headSize(t), 0);
  if (!types.some(dynamic) && args.length !== head) throw new Error(`${args.length} bytes of arguments, want exactly ${head}`);
  const [vals, used] = decodeSeq('argument', types, args);
  if (used !== args.length) throw new Error(`${args.length - used} bytes after the arguments' encoding`);
  return vals;
}

// decodeSeq reads a tuple of types laid out at the start of data: the
// heads in order, then the tails of the dynamic ones, each exactly where
// the previous one ended. It returns the values and the bytes they take.
function decodeSeq(what, types, data) {
  let head = 0;
  for (const t of types) {
    head += headSize(t);
    if (head > data.length) throw new Error(`${data.length} bytes, too short for the heads of ${types.length} ${what}s`);
  }
  const vals = [];
  let at = 0;
  let tail = head;
  types.forEach((t, i) => {
    const size = headSize(t);
    const where = (err) => new Error(`${what} ${i}: ${err.message}`);
    if (!dynamic(t)) {
      try {
        vals.push(decodeStatic(t, data.subarray(at, at + size)));
      } catch (err) {
        throw where(err);
      }
      at += size;
      return;
    }
    let off = -1;
    try {
      off = readSize(data.subarray(at, at + 32));
    } catch {
      // reported below, as an offset not where the encoding puts it
    }
    if (off !== tail) throw new Error(`${what} ${i}: offset is not ${tail}, where the canonical encoding puts it`);
    try {
      const [v, used] = decodeDynamic(t, data.subarray(tail));
      vals.push(v);
      tail += used;
    } catch (err) {
      throw where(err);
    }
    at += size;
  });
  return [vals, tail];
}

function decodeStatic(t, w) {
  switch (t.kind) {
    case 'tuple':
      return { items: decodeSeq('field', t.fields, w)[0] };
    case 'address':
      if (!allZero(w.subarray(0, 12))) throw new Error('an address with non-zero upper bytes');
      break;
    case 'bool':
      if (!allZero(w.subarray(0, 31)) || w[31] > 1) throw new Error('a bool that is not 0 or 1');
      break;
    case 'uint':
      if (!allZero(w.subarray(0, 32 - t.size))) throw new Error(`a uint${8 * t.size} with non-zero upper bytes`);
      break;
    case 'fixed':
      if (!allZero(w.subarray(t.size))) throw new Error(`a bytes${t.size} with non-zero padding`);
      break;
    default:
      throw new Error(`internal error: ${t.kind} is not static`);
  }
  return { word: w.slice() };
}

function decodeDynamic(t, data) {
  if (data.length < 32) throw new Error('no length word');
  // As policy does, even a dynamic tuple, which has no length word, must
  // start with a word that could be one.
  const n = readSize(data.subarray(0, 32));
  const rest = data.subarray(32);
  switch (t.kind) {
    case 'bytes': {
      const padded = Math.ceil(n / 32) * 32;
      if (n > rest.length || padded > rest.length) throw new Error(`${n} bytes of content, more than the call data holds`);
      if (!allZero(rest.subarray(n, padded))) throw new Error('non-zero padding after bytes');
      return [{ bytes: rest.slice(0, n) }, 32 + padded];
    }
    case 'array': {
      // Each item takes at least 32 bytes: a count beyond that cannot be
      // real, and is refused before anything is allocated.
      if (n > Math.floor(rest.length / 32)) throw new Error(`${n} items, more than the call data holds`);
      const [items, used] = decodeSeq('item', Array(n).fill(t.elem), rest);
      return [{ items }, 32 + used];
    }
    case 'tuple': {
      const [items, used] = decodeSeq('field', t.fields, data);
      return [{ items }, used];
    }
    default:
      throw new Error(`internal error: ${t.kind} is not dynamic`);
  }
}

// readSize reads an offset or a length: a word whose value fits well
// below any call data size.
function readSize(w) {
  if (!allZero(w.subarray(0, 28)) || w[28] & 0x80) throw new Error('an offset or length beyond any call data');
  return ((w[28] << 24) | (w[29] << 16) | (w[30] << 8) | w[31]) >>> 0;
}

const addressOf = (v) => hex(v.word.subarray(12));
const uintOf = (v) => BigInt(hex(v.word));

function formatValue(t, v) {
  switch (t.kind) {
    case 'address': return addressOf(v);
    case 'bool': return v.word[31] === 1 ? 'true' : 'false';
    case 'uint': return uintOf(v).toString();
    case 'fixed': return hex(v.word.subarray(0, t.size));
    case 'bytes': return hex(v.bytes);
    case 'array': return `[${v.items.map((item) => formatValue(t.elem, item)).join(', ')}]`;
    default: return `(${v.items.map((item, i) => formatValue(t.fields[i], item)).join(', ')})`;
  }
}

// --- The calls policy reads (tokens.go, erc20.go), with the same names
// for their arguments as policy.ReadCall gives.

function call(signature, selector, names, effect) {
  const types = parseTypes(signature.slice(signature.indexOf('(') + 1, -1));
  if (names && names.length !== types.length) throw new Error(`intent.js: ${signature} needs ${types.length} names`);
  return { signature, selector, types, names, effect };
}

const effect = (kind, party, amount = null) => ({ kind, party, amount: amount === null ? null : amount.toString() });
const move = (to, amount) => (args) => effect('moves', addressOf(args[to]), amount(args));
const arg = (i) => (args) => uintOf(args[i]);
const oneUnit = () => 1n;
const operatorForAll = (args) => effect(args[1].word[31] === 1 ? 'grants_all' : 'revokes', addressOf(args[0]));

const standards = [
  { name: 'ERC-20', calls: [
    call('transfer(address,uint256)', 'a9059cbb', ['recipient', 'amount'], move(0, arg(1))),
    call('transferFrom(address,address,uint256)', '23b872dd', ['from', 'recipient', 'amount'], move(1, arg(2))),
    // approve sets the allowance: 0 revokes it.
    call('approve(address,uint256)', '095ea7b3', ['spender', 'amount'], (args) => (uintOf(args[1]) > 0n
      ? effect('grants', addressOf(args[0]), uintOf(args[1]))
      : effect('revokes', addressOf(args[0])))),
    call('increaseAllowance(address,uint256)', '39509351', ['spender', 'added_amount'],
      (args) => effect('grants', addressOf(args[0]), uintOf(args[1]))),
  ] },
  { name: 'ERC-721', calls: [
    call('transferFrom(address,address,uint256)', '23b872dd', ['from', 'recipient', 'token_id'], move(1, oneUnit)),
    call('safeTransferFrom(address,address,uint256)', '42842e0e', ['from', 'recipient', 'token_id'], move(1, oneUnit)),
    call('safeTransferFrom(address,address,uint256,bytes)', 'b88d4fde', ['from', 'recipient', 'token_id', 'data'], move(1, oneUnit)),
    // approve(to, tokenId) approves one token; to 0 clears it.
    call('approve(address,uint256)', '095ea7b3', ['spender', 'token_id'], (args) => (addressOf(args[0]) !== zeroAddress
      ? effect('grants', addressOf(args[0]), 1n)
      : effect('revokes', zeroAddress))),
    call('setApprovalForAll(address,bool)', 'a22cb465', ['operator', 'approved'], operatorForAll),
  ] },
  { name: 'ERC-1155', calls: [
    call('safeTransferFrom(address,address,uint256,uint256,bytes)', 'f242432a', ['from', 'recipient', 'token_id', 'amount', 'data'], move(1, arg(3))),
    // A batch moves the sum of its amounts; lists of different lengths
    // revert, and are refused.
    call('safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)', '2eb2c2d6', ['from', 'recipient', 'token_ids', 'amounts', 'data'], (args) => {
      const ids = args[2].items;
      const amounts = args[3].items;
      if (ids.length !== amounts.length) throw new Error(`${ids.length} ids and ${amounts.length} amounts`);
      return effect('moves', addressOf(args[1]), amounts.reduce((sum, a) => sum + uintOf(a), 0n));
    }),
    call('setApprovalForAll(address,bool)', 'a22cb465', ['operator', 'approved'], operatorForAll),
  ] },
];

// The allowance-granting calls policy checks on contracts that are not
// declared tokens, but for those whose selector a token standard has.
const first = (args) => addressOf(args[0]);
const second = (args) => addressOf(args[1]);
const permit2Spender = (args) => addressOf(args[1].items[1]);
const grants = [
  call('increaseApproval(address,uint256)', 'd73dd623', null, first),
  call('authorizeOperator(address)', '959b8c3f', null, first),
  call('approveAndCall(address,uint256,bytes)', 'cae9ca51', null, first),
  call('approveAndCall(address,uint256)', '3177029f', null, first),
  call('permit(address,address,uint256,uint256,uint8,bytes32,bytes32)', 'd505accf', null, second),
  call('permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)', '8fcbaf0c', null, second),
  call('permit(address,uint256,uint256,uint8,bytes32,bytes32)', '7ac2ff7b', null, first),
  call('approve(address,address,uint160,uint48)', '87517c45', null, second),
  call('permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)', '2b67b570', null, permit2Spender),
  call('permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)', '2a2d80d1', null, permit2Spender),
  call('approve(address,uint256,uint256)', '426a8493', null, first),
  call('setOperator(address,bool)', '558a7297', null, first),
  call('approveDelegation(address,uint256)', 'c04a8a10', null, first),
  call('allow(address,bool)', '110496e5', null, first),
  call('setAuthorization(address,bool)', 'eecea000', null, first),
  call('hope(address)', 'a3b22fc4', null, first),
];

/** calls lists the calls readCall reads, for the test that holds them to policy.Calls. */
export function calls() {
  return [
    ...standards.flatMap((s) => s.calls.map((c) => ({ standard: s.name, signature: c.signature, selector: c.selector }))),
    ...grants.map((c) => ({ standard: '', signature: c.signature, selector: c.selector })),
  ];
}

function reading(standard, c, data, read) {
  const r = { standard, signature: c.signature, selector: c.selector };
  try {
    const args = decodeArgs(c.types, data.subarray(4));
    r.effect = read(args);
    r.args = args.map((v, i) => ({ name: c.names ? c.names[i] : typeName(c.types[i]), value: formatValue(c.types[i], v) }));
  } catch (err) {
    r.error = err.message;
  }
  return r;
}

/**
 * readCall reads call data (bytes) as policy.ReadCall does: one reading
 * per token standard with a call of its selector, else the
 * allowance-granting call of no standard, else none. A reading has
 * standard ('' for a grant), signature, selector and either args
 * ([{name, value}]) and effect ({kind, party, amount}) or error.
 */
export function readCall(data) {
  if (data.length < 4) return [];
  const sel = hex(data.subarray(0, 4)).slice(2);
  const out = [];
  for (const s of standards) {
    const c = s.calls.find((x) => x.selector === sel);
    if (c) out.push(reading(s.name, c, data, c.effect));
  }
  const g = grants.find((x) => x.selector === sel);
  if (!out.length && g) out.push(reading('', g, data, (args) => effect('grants', g.effect(args))));
  return out;
}

// --- What the page shows.

const units = (n) => (n === '1' ? '1 unit' : `${n} units`);

/** effectText says what a call does with the signer's tokens, as txctl approve says it. */
export function effectText(e) {
  switch (e.kind) {
    case 'moves': return `moves ${units(e.amount)} of the token to ${e.party}`;
    case 'grants': return e.amount === null
      ? `gives ${e.party} power over the signer's tokens, debt or positions (an allowance, operator, permit or delegation)`
      : `lets ${e.party} spend ${units(e.amount)} of the signer's tokens`;
    case 'grants_all': return `makes ${e.party} an operator of every unit of the token the signer holds, now and later`;
    case 'revokes': return e.party === zeroAddress ? 'revokes the token\'s approval' : `revokes the allowance or operator approval of ${e.party}`;
    default: return `${e.kind} ${e.party}`;
  }
}

/** callView shows what a transaction's call data does, as the signer's policy reads it. */
export function callView(tx) {
  const data = fromHex(tx.data || '0x');
  if (!data) return h('span', { class: 'bad', text: 'the data is not hex' });
  if (!tx.to) return h('span', { text: `contract creation: ${data.length} bytes of init code, not decoded` });
  if (!data.length) return h('span', { text: 'none (a plain transfer of value)' });
  if (data.length < 4) return h('span', { text: `${data.length} bytes of call data, too short for a selector` });
  const readings = readCall(data);
  if (!readings.length) {
    return h('span', { class: 'warn', text: `selector ${hex(data.subarray(0, 4))}, ${data.length} bytes of call data: not a call the signer's policy decodes` });
  }
  const many = readings.length > 1;
  return h('div', { class: 'call' },
    many ? h('p', { class: 'small', text: `${readings.length} readings of one selector: the signer's policy takes that of the standard its policy file declares ${tx.to} to be` }) : null,
    readings.map((r) => {
      let head = r.standard ? `${r.standard} ${r.signature}, token contract ${tx.to}` : `${r.signature}, an allowance-granting call`;
      if (many && r.standard) head = `as ${head}`;
      if (r.error) {
        return h('div', { class: 'reading', data: { standard: r.standard, malformed: '' } },
          h('span', { class: 'bad', text: `${head}: malformed, the signer's policy refuses it as this call (${r.error})` }));
      }
      const dl = h('dl', { class: 'facts' });
      for (const a of r.args) dl.append(h('dt', { text: a.name }), h('dd', null, mono(a.value || '""')));
      dl.append(h('dt', { text: 'effect' }), h('dd', { class: 'effect', text: effectText(r.effect) }));
      return h('div', { class: 'reading', data: { standard: r.standard } }, h('div', { class: 'head', text: head }), dl);
    }));
}

/** callSummary is a few words on a transaction's call, for lists. */
export function callSummary(tx) {
  const data = fromHex(tx.data || '0x');
  if (!data) return 'invalid data';
  if (!tx.to) return 'contract creation';
  if (!data.length) return 'value transfer';
  const readings = readCall(data);
  if (!readings.length) return data.length < 4 ? `${data.length} bytes of data` : `call ${hex(data.subarray(0, 4))}`;
  const name = readings[0].signature.slice(0, readings[0].signature.indexOf('('));
  if (readings.some((r) => r.error)) return `malformed ${name}`;
  if (readings.length > 1) return `${name} (${readings.map((r) => r.standard).join(' or ')})`;
  return readings[0].standard ? `${readings[0].standard} ${name}` : `${name} (allowance)`;
}

/** feeFacts are the fees a transaction asks for and txctl approve's default fee ceiling. */
function feeFacts(tx) {
  const notSet = () => h('span', { class: 'muted', text: 'not set: txmanager prices it when it allocates a nonce' });
  let gas = h('span', { class: 'muted', text: 'not fixed yet' });
  if (tx.gas_limit !== undefined && tx.gas_limit !== null) gas = String(tx.gas_limit);
  else if (tx.gas !== undefined && tx.gas !== null) gas = `${tx.gas} (asked for; not fixed yet)`;
  return [
    ['Max fee per gas', tx.max_fee_per_gas ? h('span', null, `${tx.max_fee_per_gas} wei (`, gwei(tx.max_fee_per_gas), ')') : notSet()],
    ['Max priority fee', tx.type === 'legacy' ? 'none: a legacy transaction\'s tip is its gas price'
      : tx.max_priority_fee_per_gas ? h('span', null, `${tx.max_priority_fee_per_gas} wei (`, gwei(tx.max_priority_fee_per_gas), ')') : notSet()],
    ['Gas limit', gas],
    ['Fee ceiling', tx.fee_ceiling
      ? h('span', null, `${tx.fee_ceiling} wei per gas (`, gwei(tx.fee_ceiling), '): txctl approve signs it unless given --max-fee; a fee bump above it needs new approvals')
      : h('span', { class: 'warn', text: 'none: the approver names one with --max-fee' })],
  ];
}

/**
 * intentFacts are [term, value] pairs of what an approval of tx covers:
 * the intent's fields, the call decoded, the fees and the fee ceiling.
 * intentOut is filled with the intent hash txctl approve prints.
 */
export function intentFacts(tx, intentOut) {
  return [
    ['Chain', tx.chain_id],
    ['From', mono(tx.from)],
    ['To', tx.to ? mono(tx.to) : h('em', { text: 'contract creation' })],
    ['Type', tx.type || h('span', { class: 'bad', text: 'none: its chain is no longer configured, and it cannot be approved' })],
    ['Value', h('span', null, `${tx.value} wei (`, eth(tx.value), ')')],
    ['Call', callView(tx)],
    ...feeFacts(tx),
    ['Intent', intentOut],
  ];
}

/**
 * approveCommand is what an approver runs on their own machine to approve
 * tx; null when the id is not a UUID (the command is pasted into a
 * shell, and the id comes from the network).
 */
export function approveCommand(tx) {
  if (!uuid.test(tx.tx_id || '')) return null;
  const cmd = `txctl approve ${tx.tx_id} --key-file <your key file>`;
  return tx.fee_ceiling ? cmd : `${cmd} --max-fee <wei per gas>`;
}

/** rejectCommand is what an approver runs to reject tx; null as for approveCommand. */
export function rejectCommand(tx) {
  return uuid.test(tx.tx_id || '') ? `txctl reject ${tx.tx_id} --key-file <your key file>` : null;
}

// --- The intent hash (docs/signer.md, "Approvals"), which txctl approve
// prints too: the approver can match the two.
//   intent = SHA-256("txfence/intent/v1" 0x00 ‖ uint64 BE chain_id ‖ from (20) ‖ uint8 len(type) ‖ type
//                    ‖ 0x00, or 0x01 ‖ to (20) ‖ value (32, BE) ‖ uint64 BE len(data) ‖ data)

function uint64(n) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

function word(v) {
  const out = new Uint8Array(32);
  for (let i = 31; i >= 0 && v > 0n; i--, v >>= 8n) out[i] = Number(v & 0xffn);
  return out;
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}

const ascii = (s) => new TextEncoder().encode(s);

/** intentBytes is the encoding the intent hash covers, checked field by field. */
export function intentBytes(tx) {
  const type = tx.type;
  if (type !== 'eip1559' && type !== 'legacy') throw new Error('the transaction carries no type (eip1559 or legacy)');
  if (!Number.isSafeInteger(tx.chain_id) || tx.chain_id < 1) throw new Error('the transaction has no valid chain_id');
  if (!address.test(tx.from || '')) throw new Error('the transaction has no valid from');
  if (tx.to !== undefined && tx.to !== null && !address.test(tx.to)) throw new Error('the transaction has an invalid to');
  if (!uint256.test(tx.value || '') || BigInt(tx.value) >= 1n << 256n) throw new Error('the transaction has no valid value');
  const data = fromHex(tx.data || '0x');
  if (!data) throw new Error('the transaction has invalid data');
  return concat([
    ascii('txfence/intent/v1\0'),
    uint64(tx.chain_id),
    fromHex(tx.from),
    Uint8Array.of(type.length), ascii(type),
    tx.to ? concat([Uint8Array.of(1), fromHex(tx.to)]) : Uint8Array.of(0),
    word(BigInt(tx.value)),
    uint64(data.length), data,
  ]);
}

/** intent is the intent hash as hex; WebCrypto's digest needs HTTPS or localhost. */
export async function intent(tx) {
  if (!globalThis.isSecureContext || !globalThis.crypto || !crypto.subtle) {
    throw new Error('shown over HTTPS (or on localhost) only');
  }
  return hex(new Uint8Array(await crypto.subtle.digest('SHA-256', intentBytes(tx))));
}

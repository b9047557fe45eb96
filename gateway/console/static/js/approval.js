// Approver signatures, made in the browser with WebCrypto Ed25519.
//
// The approver's key file is the one `signerctl approver new` writes:
//   {"kind": "txfence-approver-key-v1", "id": "alice", "seed": "<base64, 32 bytes>", "public_key": "<base64, 32 bytes>"}
// It is read the way `signerctl approver sign` reads it (strictly; the seed
// must give the public key the file lists) and imported as a
// non-extractable CryptoKey that lives in this module's memory only: it is
// never sent, never stored, and gone on sign-out or reload.
//
// What is signed is docs/signer.md's approval message, rebuilt here from
// the transaction's fields exactly as signerd rebuilds it, with the fee
// ceiling the approver gives (the highest fee cap per gas the approval
// covers):
//   "txfence/approval/v2" 0x00 ‖ intent (32) ‖ uint64 BE len(tx_id) ‖ tx_id
//     ‖ max_fee_per_gas (32, BE) ‖ uint64 BE expiry (Unix seconds)
//   intent = SHA-256("txfence/intent/v1" 0x00 ‖ uint64 BE chain_id ‖ from (20) ‖ uint8 len(type) ‖ type
//                    ‖ 0x00, or 0x01 ‖ to (20) ‖ value (32, BE) ‖ uint64 BE len(data) ‖ data)

const keyKind = 'txfence-approver-key-v1';
const approverID = /^[A-Za-z0-9._@-]{1,64}$/;
const address = /^0x[0-9a-fA-F]{40}$/;
const hexData = /^0x([0-9a-fA-F]{2})*$/;
const uint256 = /^(0|[1-9][0-9]{0,77})$/;

// PKCS #8 wrapping of a raw Ed25519 seed (RFC 8410): WebCrypto imports
// Ed25519 private keys as PKCS #8 or JWK only.
const pkcs8Prefix = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20);

let loaded = null; // {id, publicKey (base64), key (CryptoKey)}

function subtle() {
  if (!globalThis.isSecureContext || !globalThis.crypto || !crypto.subtle) {
    throw new Error('WebCrypto is not available: open the console over HTTPS (or on localhost)');
  }
  return crypto.subtle;
}

/** base64Strict decodes standard padded base64, refusing anything else. */
export function base64Strict(s) {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  const bin = atob(s);
  const out = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return base64(out) === s ? out : null;
}

/** base64 encodes bytes as standard padded base64. */
export function base64(bytes) {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** hex encodes bytes as 0x-prefixed lowercase hex. */
export function hex(bytes) {
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function fromHex(s) {
  const body = s.slice(2);
  const out = new Uint8Array(body.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(body.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function uint64(n) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

/** word is a uint256 as 32 big-endian bytes. */
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

/**
 * parseKeyFile reads an approver key file as `signerctl approver sign` does:
 * a JSON object with exactly kind, id, seed and public_key.
 */
export function parseKeyFile(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('not an approver key file (not JSON): load the file `signerctl approver new` wrote');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc) || doc.kind !== keyKind) {
    throw new Error(`not an approver key file (kind is not "${keyKind}")`);
  }
  const extra = Object.keys(doc).filter((k) => !['kind', 'id', 'seed', 'public_key'].includes(k));
  if (extra.length) throw new Error(`approver key file: unknown field(s) ${extra.join(', ')}`);
  if (typeof doc.id !== 'string' || !approverID.test(doc.id)) {
    throw new Error('approver key file: the id is not an approver id (1 to 64 letters, digits, ".", "_", "-" or "@")');
  }
  const seed = base64Strict(doc.seed);
  if (!seed || seed.length !== 32) throw new Error('approver key file: the seed is not 32 bytes of base64');
  const pub = base64Strict(doc.public_key);
  if (!pub || pub.length !== 32) throw new Error('approver key file: the public key is not 32 bytes of base64');
  return { id: doc.id, seed, publicKey: pub };
}

/**
 * loadApproverKey imports the key file's seed as a non-extractable
 * signing key, after checking that it gives the listed public key, and
 * keeps it in memory. It returns the approver's id and public key.
 */
export async function loadApproverKey(text) {
  const { id, seed, publicKey } = parseKeyFile(text);
  const der = concat([pkcs8Prefix, seed]);
  seed.fill(0);
  let key;
  try {
    key = await subtle().importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign']);
  } finally {
    der.fill(0);
  }
  // A damaged file must not sign under an unknown key: the seed has to
  // give the public key the file lists (as signerd's tool checks).
  const pub = await subtle().importKey('raw', publicKey, { name: 'Ed25519' }, true, ['verify']);
  const probe = ascii('txfence/console/key-check');
  const sig = await subtle().sign({ name: 'Ed25519' }, key, probe);
  if (!(await subtle().verify({ name: 'Ed25519' }, pub, sig, probe))) {
    throw new Error('approver key file: the seed does not give the public key the file lists');
  }
  loaded = { id, publicKey: base64(publicKey), key };
  return { id, publicKey: loaded.publicKey };
}

/** approver is the loaded approver ({id, publicKey}) or null. */
export function approver() {
  return loaded ? { id: loaded.id, publicKey: loaded.publicKey } : null;
}

/** forgetApprover drops the key from memory. */
export function forgetApprover() {
  loaded = null;
}

/** intentBytes is the encoding the intent hash covers, checked field by field. */
export function intentBytes(tx, type) {
  if (type === undefined) throw new Error('the transaction carries no type (eip1559 or legacy): its chain is no longer configured');
  if (type !== 'eip1559' && type !== 'legacy') throw new Error(`type ${type}: want eip1559 or legacy`);
  if (!Number.isSafeInteger(tx.chain_id) || tx.chain_id < 1) throw new Error('the transaction has no valid chain_id');
  if (!address.test(tx.from || '')) throw new Error('the transaction has no valid from');
  if (tx.to !== undefined && tx.to !== null && !address.test(tx.to)) throw new Error('the transaction has an invalid to');
  if (!uint256.test(tx.value || '')) throw new Error('the transaction has no valid value');
  const data = tx.data || '0x';
  if (!hexData.test(data)) throw new Error('the transaction has invalid data');
  const value = BigInt(tx.value);
  if (value >= 1n << 256n) throw new Error('the value exceeds uint256');
  const dataBytes = fromHex(data);
  return concat([
    ascii('txfence/intent/v1\0'),
    uint64(tx.chain_id),
    fromHex(tx.from),
    Uint8Array.of(type.length), ascii(type),
    tx.to ? concat([Uint8Array.of(1), fromHex(tx.to)]) : Uint8Array.of(0),
    word(value),
    uint64(dataBytes.length), dataBytes,
  ]);
}

/** intent is SHA-256 of intentBytes. */
export async function intent(tx, type) {
  return new Uint8Array(await subtle().digest('SHA-256', intentBytes(tx, type)));
}

/**
 * feeCeiling reads a fee ceiling as the API writes amounts: a decimal
 * uint256 of wei per gas, without sign, unit or leading zeros.
 */
export function feeCeiling(s) {
  const text = typeof s === 'string' ? s.trim() : '';
  if (!uint256.test(text) || BigInt(text) >= 1n << 256n) {
    throw new Error('give the fee ceiling, the highest fee cap per gas the approval covers, as a decimal amount of wei (30 gwei is 30000000000)');
  }
  return text;
}

/**
 * approvalMessage is what the approver signs (docs/signer.md, "Approvals"):
 * maxFeePerGas is the fee ceiling, a decimal string (feeCeiling).
 */
export function approvalMessage(intentHash, txID, maxFeePerGas, expirySeconds) {
  const id = new TextEncoder().encode(txID);
  return concat([ascii('txfence/approval/v2\0'), intentHash, uint64(id.length), id, word(BigInt(feeCeiling(maxFeePerGas))), uint64(expirySeconds)]);
}

/** rfc3339 is a Unix time in whole seconds as RFC 3339 UTC, without fraction. */
export function rfc3339(seconds) {
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * signApproval signs the loaded approver's approval of tx (as the API
 * returned it) at fee caps up to maxFeePerGas (wei per gas, a decimal
 * string) until expirySeconds (Unix time, whole seconds) and returns the
 * body of POST /api/v1/tx/{id}/approvals.
 */
export async function signApproval(tx, type, maxFeePerGas, expirySeconds) {
  if (!loaded) throw new Error('load the approver key first');
  const ceiling = feeCeiling(maxFeePerGas);
  const expiry = Math.trunc(expirySeconds);
  if (!Number.isSafeInteger(expiry) || expiry * 1000 <= Date.now()) throw new Error('the approval\'s expiry must be in the future');
  const msg = approvalMessage(await intent(tx, type), tx.tx_id, ceiling, expiry);
  const sig = new Uint8Array(await subtle().sign({ name: 'Ed25519' }, loaded.key, msg));
  return { approver: loaded.id, max_fee_per_gas: ceiling, expiry: rfc3339(expiry), signature: base64(sig) };
}

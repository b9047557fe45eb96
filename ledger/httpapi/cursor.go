package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/big"

	"github.com/txfence/txfence/ledger"
)

// A cursor is opaque to callers: base64url of a version, the list it
// pages, its position in the list, and an HMAC-SHA256 over those and the
// list's scope (its filters, or its account) under the API's key.
//
// A statement's cursor carries where the page's last entry is (its balance
// version and entry id) and the running balance after it, which the next
// page starts from, so that a page costs its own entries and not the
// account's history. The MAC keeps a caller from forging that balance,
// which the next page would answer as the ledger's, and ties each cursor
// to the list that issued it: another account's cursor, or one issued for
// other filters, is refused like garbage.

// cursorKind names the list a cursor pages.
type cursorKind byte

const (
	accountsCursor cursorKind = 'a'
	// entriesCursor pages a statement by balance version, then entry id.
	// Statements before migration 0007 were paged by entry id alone, with
	// kind 'e': such a cursor is refused like garbage (its caller reads
	// the statement again from the start), never read as a version.
	entriesCursor  cursorKind = 's'
	journalsCursor cursorKind = 'j'
	// reconciliationsCursor pages runs newest first: its id is the last
	// run shown, and the next page holds older ones.
	reconciliationsCursor cursorKind = 'r'
	// transitsCursor pages transits newest first: its id is the seq of
	// the last transit shown.
	transitsCursor cursorKind = 't'
)

const (
	cursorVersion = 1
	// macSize is how much of the HMAC a cursor keeps: forging one takes
	// 2^128 guesses.
	macSize = 16
	// maxCursor is the longest cursor components.yaml's Cursor admits.
	maxCursor = 512
	// maxMagnitude bounds a carried balance: the sum of 2^63 amounts
	// below 2^256 is below 2^319, 40 bytes.
	maxMagnitude = 40
)

// errCursor is the detail of every cursor refused.
var errCursor = errors.New("not a cursor of this list: pass the next_cursor of the previous page, with the same filters, to the ledgerd that answered it")

// cursors seals and opens the API's cursors.
type cursors struct {
	key []byte
}

// seal makes the cursor of payload in the list kind of scope.
func (c cursors) seal(kind cursorKind, scope string, payload []byte) string {
	msg := append([]byte{cursorVersion, byte(kind)}, payload...)
	return base64.RawURLEncoding.EncodeToString(append(msg, c.mac(msg, scope)...))
}

// open returns the payload of s, a cursor seal made for the list kind of
// scope, or errCursor.
func (c cursors) open(kind cursorKind, scope, s string) ([]byte, error) {
	if len(s) > maxCursor {
		return nil, errCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 2+macSize {
		return nil, errCursor
	}
	msg, mac := b[:len(b)-macSize], b[len(b)-macSize:]
	if msg[0] != cursorVersion || msg[1] != byte(kind) || !hmac.Equal(mac, c.mac(msg, scope)) {
		return nil, errCursor
	}
	return msg[2:], nil
}

func (c cursors) mac(msg []byte, scope string) []byte {
	h := hmac.New(sha256.New, c.key)
	// Lengths first, so no cursor and scope can be cut into another pair.
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(msg))))
	h.Write(msg)
	h.Write([]byte(scope))
	return h.Sum(nil)[:macSize]
}

// sealID is the cursor of a list ordered by id, after id.
func (c cursors) sealID(kind cursorKind, scope string, id int64) string {
	return c.seal(kind, scope, binary.BigEndian.AppendUint64(nil, uint64(id)))
}

// openID is the id a cursor of sealID carries.
func (c cursors) openID(kind cursorKind, scope, s string) (int64, error) {
	b, err := c.open(kind, scope, s)
	if err != nil || len(b) != 8 {
		return 0, errCursor
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// statementScope ties a statement's cursors to their account.
func statementScope(accountID int64) string {
	return string(binary.BigEndian.AppendUint64(nil, uint64(accountID)))
}

// sealPosition is the cursor of an account's statement after pos.
func (c cursors) sealPosition(accountID int64, pos ledger.StatementPosition) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(pos.Version))
	b = binary.BigEndian.AppendUint64(b, uint64(pos.EntryID))
	sign := byte(0)
	if pos.Balance.Sign() < 0 {
		sign = 1
	}
	b = append(b, sign)
	b = append(b, pos.Balance.Bytes()...)
	return c.seal(entriesCursor, statementScope(accountID), b)
}

// openPosition is the position a cursor of sealPosition carries.
func (c cursors) openPosition(accountID int64, s string) (ledger.StatementPosition, error) {
	b, err := c.open(entriesCursor, statementScope(accountID), s)
	if err != nil || len(b) < 17 || len(b) > 17+maxMagnitude || b[16] > 1 {
		return ledger.StatementPosition{}, errCursor
	}
	pos := ledger.StatementPosition{
		Version: int64(binary.BigEndian.Uint64(b)),
		EntryID: int64(binary.BigEndian.Uint64(b[8:])),
		Balance: new(big.Int).SetBytes(b[17:]),
	}
	if b[16] == 1 {
		pos.Balance.Neg(pos.Balance)
	}
	return pos, nil
}

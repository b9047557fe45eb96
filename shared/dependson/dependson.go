// Package dependson is the wire form of a transaction's depends_on: the
// transactions that must all be CONFIRMED before it is worked on, on any
// chain. The gateway, txmanager and the ledger read it with one rule here:
// a JSON array of 1 to Max distinct transaction ids, or one id as a bare
// string, as clients wrote it when a transaction had one parent at most
// (and as INIT events carried it then). Every service writes the array.
package dependson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// Max bounds the parents of one transaction.
const Max = 16

// Field is the member's name in requests, transactions and INIT events.
const Field = "depends_on"

// List is a transaction's parents, in the order the client gave them.
// The zero value is no parent; a List read from JSON is never empty.
type List []uuid.UUID

// UnmarshalJSON reads an array of transaction ids or one id as a bare
// string; null is no parent. A malformed id is named by its index
// (/depends_on/2) in the *errs.Error it returns.
func (l *List) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*l = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return invalid(Pointer(-1), "a transaction id, or an array of them")
		}
		id, err := parse(s)
		if err != nil {
			return invalid(Pointer(-1), fmt.Sprintf("%q is not a transaction id", s))
		}
		*l = List{id}
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return invalid(Pointer(-1), "a transaction id, or an array of them")
	}
	if len(raw) == 0 {
		return invalid(Pointer(-1), "an empty array: leave depends_on out for no parent")
	}
	if len(raw) > Max {
		return invalid(Pointer(-1), fmt.Sprintf("%d transactions; at most %d", len(raw), Max))
	}
	out := make(List, len(raw))
	for i, r := range raw {
		var s string
		if json.Unmarshal(r, &s) != nil {
			return invalid(Pointer(i), "a transaction id is a string")
		}
		id, err := parse(s)
		if err != nil {
			return invalid(Pointer(i), fmt.Sprintf("%q is not a transaction id", s))
		}
		out[i] = id
	}
	*l = out
	return nil
}

// parse reads a transaction id as the API writes it: the canonical
// 36-character form, not the other spellings uuid.Parse allows.
func parse(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.UUID{}, fmt.Errorf("not 36 characters")
	}
	return uuid.Parse(s)
}

func invalid(pointer, detail string) error {
	return errs.InvalidFields(Field+": "+detail, errs.FieldError{Pointer: pointer, Detail: detail})
}

// Pointer is the JSON pointer of parent i in a request body, or of the
// member itself for i < 0.
func Pointer(i int) string {
	if i < 0 {
		return "/" + Field
	}
	return fmt.Sprintf("/%s/%d", Field, i)
}

// Check names what makes l no valid set of parents for a transaction:
// more than Max, or an id given twice (the second one is named). A
// transaction's own id (self) is refused too when given; uuid.Nil checks
// nothing more.
func (l List) Check(self uuid.UUID) []errs.FieldError {
	var out []errs.FieldError
	if len(l) > Max {
		out = append(out, errs.FieldError{Pointer: Pointer(-1), Detail: fmt.Sprintf("%d transactions; at most %d", len(l), Max)})
	}
	for i, id := range l {
		switch first := slices.Index(l, id); {
		case first < i:
			out = append(out, errs.FieldError{Pointer: Pointer(i), Detail: fmt.Sprintf("%s again: it is %s already", id, Pointer(first))})
		case self != uuid.Nil && id == self:
			out = append(out, errs.FieldError{Pointer: Pointer(i), Detail: "the transaction itself"})
		}
	}
	return out
}

// Sorted is l in ascending byte order, a new slice: the canonical order
// in which a set of parents is hashed, whatever order it was given in.
func (l List) Sorted() List {
	out := slices.Clone(l)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// Index is the position of id in l, -1 when l does not hold it.
func (l List) Index(id uuid.UUID) int { return slices.Index(l, id) }

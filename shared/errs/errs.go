// Package errs is the error vocabulary shared by every txfence service.
//
// An error carries a Kind that says what the caller can do about it. Kinds are
// mapped once to HTTP statuses and RFC 9457 problem documents (problem.go),
// and mapped back by clients, so a Conflict raised in txmanager is still a
// Conflict when the gateway receives it over HTTP.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies an error by what the caller can do about it.
type Kind uint8

// The kinds, from the caller's point of view. The zero value is Internal so
// that an unclassified error is never mistaken for the caller's fault.
const (
	Internal     Kind = iota // a bug or an unexpected failure: retrying may not help
	Invalid                  // the request is malformed or breaks a rule: do not retry as is
	NotFound                 // the named thing does not exist (or is not visible to the caller)
	Conflict                 // the request clashes with the current state, e.g. a reused idempotency key
	Unauthorized             // no valid credentials were presented
	Forbidden                // the credentials do not allow this action
	Unavailable              // a dependency is down or the service is overloaded: retry later
	RateLimited              // the caller exceeded its quota: retry after the indicated delay
)

// Kinds lists every kind, for tests and documentation.
var Kinds = []Kind{Internal, Invalid, NotFound, Conflict, Unauthorized, Forbidden, Unavailable, RateLimited}

var kindNames = [...]string{
	Internal:     "internal",
	Invalid:      "invalid",
	NotFound:     "not_found",
	Conflict:     "conflict",
	Unauthorized: "unauthorized",
	Forbidden:    "forbidden",
	Unavailable:  "unavailable",
	RateLimited:  "rate_limited",
}

// String returns the kind's stable name, used in problem type URIs and logs.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) {
	for k, name := range kindNames {
		if name == s {
			return Kind(k), true
		}
	}
	return Internal, false
}

// FieldError names one invalid input field, as the problem document's
// "errors" member (RFC 9457 section 3's example extension).
type FieldError struct {
	// Pointer is a JSON Pointer (RFC 6901) into the request body, or the name
	// of a header, query or path parameter.
	Pointer string `json:"pointer"`
	Detail  string `json:"detail"`
}

// Error is an error with a kind and a message that is safe to show the caller.
type Error struct {
	Kind Kind
	// Message is shown to the caller as the problem's detail. Keep secrets
	// and internal details out of it; wrap them in Err instead.
	Message string
	// Fields lists the invalid inputs of an Invalid error.
	Fields []FieldError
	// Err is the underlying cause; it is logged, never sent to the caller.
	Err error
}

// E returns an error of the given kind with a caller-visible message.
func E(kind Kind, message string) *Error {
	return &Error{Kind: kind, Message: message}
}

// Errorf is E with formatting. A %w verb keeps the cause for errors.Is/As and
// for the log, but the cause's text still becomes part of the message, so
// only wrap errors that are safe to show.
func Errorf(kind Kind, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap classifies cause under kind with a caller-visible message; the cause
// itself stays internal.
func Wrap(kind Kind, message string, cause error) *Error {
	return &Error{Kind: kind, Message: message, Err: cause}
}

// InvalidFields returns an Invalid error naming the failing fields.
func InvalidFields(message string, fields ...FieldError) *Error {
	return &Error{Kind: Invalid, Message: message, Fields: fields}
}

func (e *Error) Error() string {
	switch {
	case e.Message != "" && e.Err != nil:
		return e.Message + ": " + e.Err.Error()
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return e.Err.Error()
	default:
		return e.Kind.String()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of the outermost *Error in err's chain, or Internal
// when there is none. A nil error has no kind; KindOf(nil) is Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Is reports whether err is classified as kind.
func Is(err error, kind Kind) bool {
	return err != nil && KindOf(err) == kind
}

// publicMessage is what the caller may see of err: the message of a
// classified error, and nothing of an unclassified one.
func publicMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != Internal {
		if e.Message != "" {
			return e.Message
		}
	}
	return ""
}

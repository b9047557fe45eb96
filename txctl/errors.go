package txctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txfence/txfence/openapi/components"
)

// usageError is a command line txctl cannot run: nothing was sent.
type usageError struct {
	cmd string // the command whose help explains, or "" for txctl's
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// flagError explains a flag the command's FlagSet refused; a global flag
// put after the command gets told where it goes.
func flagError(cmd *command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok && globalFlags[strings.TrimLeft(name, "-")] {
		return usagef(cmd.name, "--%s is a global flag: put it before the command (txctl --%s ... %s ...)",
			strings.TrimLeft(name, "-"), strings.TrimLeft(name, "-"), cmd.name)
	}
	return usagef(cmd.name, "%s", msg)
}

// apiError is an answer of the API that is not the one asked for: a
// problem document (RFC 9457), or whatever a proxy on the way sent.
type apiError struct {
	op      string
	status  int
	problem *components.Problem
	// body is the start of a response that is no problem document.
	body string
	// header is the response's, where a caller wants more of it.
	header http.Header
}

// retryAfter is how long the answer asked to wait (Retry-After in
// seconds), 0 when it did not.
func (e *apiError) retryAfter() time.Duration {
	if e == nil || e.header == nil {
		return 0
	}
	n, err := strconv.Atoi(e.header.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

func (e *apiError) Error() string {
	if e.problem == nil {
		return fmt.Sprintf("%s: %d %s: %s", e.op, e.status, http.StatusText(e.status), e.body)
	}
	msg := fmt.Sprintf("%s: %s", e.op, e.problem.Title)
	if e.problem.Detail != nil && *e.problem.Detail != "" {
		msg += ": " + *e.problem.Detail
	}
	return msg
}

// newAPIError reads an unexpected answer.
func newAPIError(op string, status int, contentType string, body []byte) error {
	e := &apiError{op: op, status: status}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var p components.Problem
	if (mediaType == "application/problem+json" || mediaType == "application/json") && json.Unmarshal(body, &p) == nil && p.Title != "" {
		e.problem = &p
		return e
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		text += "…"
	}
	if text == "" {
		text = "(no body)"
	}
	e.body = text
	return e
}

// finalStateError is a watched transaction that ended without the effect
// it was sent for.
type finalStateError struct {
	txID   string
	state  string
	reason string
}

func (e *finalStateError) Error() string {
	msg := fmt.Sprintf("transaction %s ended %s", e.txID, e.state)
	if e.reason != "" {
		msg += " (" + e.reason + ")"
	}
	return msg
}

// report writes err for a person: a problem's title and detail, then each
// failing field on its own line.
func report(w io.Writer, err error) {
	var u *usageError
	var a *apiError
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(w, "txctl: %s\n", u.msg)
		if u.cmd != "" {
			fmt.Fprintf(w, "Run 'txctl help %s' for usage.\n", u.cmd)
		} else {
			fmt.Fprintln(w, "Run 'txctl help' for usage.")
		}
	case errors.As(err, &a):
		fmt.Fprintf(w, "txctl: %s\n", err)
		if a.problem != nil {
			if a.problem.Errors != nil {
				for _, f := range *a.problem.Errors {
					fmt.Fprintf(w, "  %s: %s\n", f.Pointer, f.Detail)
				}
			}
			if a.problem.RequestId != nil && *a.problem.RequestId != "" {
				fmt.Fprintf(w, "  (request id %s)\n", *a.problem.RequestId)
			}
		}
	default:
		fmt.Fprintf(w, "txctl: %s\n", err)
	}
}

// response is what every generated response wrapper offers.
type response interface {
	StatusCode() int
	GetBody() []byte
	ContentType() string
}

// check turns a generated client call's outcome into an error unless the
// API answered one of the statuses wanted. op names the call for the
// message.
func (x *env) check(op string, r response, err error, want ...int) error {
	if err != nil {
		return x.transportError(op, err)
	}
	for _, s := range want {
		if r.StatusCode() == s {
			return nil
		}
	}
	return newAPIError(op, r.StatusCode(), r.ContentType(), r.GetBody())
}

// transportError explains a request that got no usable answer.
func (x *env) transportError(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && x.ctx.Err() != nil {
		return fmt.Errorf("%s: no answer within %s (--timeout)", op, x.timeout)
	}
	if errors.Is(err, context.Canceled) && x.ctx.Err() != nil {
		return fmt.Errorf("%s: interrupted", op)
	}
	return fmt.Errorf("%s: %w", op, err)
}

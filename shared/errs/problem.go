package errs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ProblemContentType is the media type of RFC 9457 problem documents.
const ProblemContentType = "application/problem+json"

// typePrefix starts every problem type URI; the kind's name follows, so
// "urn:txfence:problem:conflict" is a Conflict on either side of a hop.
const typePrefix = "urn:txfence:problem:"

// Problem is an RFC 9457 problem document, with txfence's extensions.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// RequestID ties the answer to the server's log lines.
	RequestID string `json:"request_id,omitempty"`
	// Errors names the failing input fields of an invalid request.
	Errors []FieldError `json:"errors,omitempty"`
}

var kindStatus = [...]int{
	Internal:     http.StatusInternalServerError,
	Invalid:      http.StatusBadRequest,
	NotFound:     http.StatusNotFound,
	Conflict:     http.StatusConflict,
	Unauthorized: http.StatusUnauthorized,
	Forbidden:    http.StatusForbidden,
	Unavailable:  http.StatusServiceUnavailable,
	RateLimited:  http.StatusTooManyRequests,
}

// HTTPStatus is the status code a kind is answered with.
func (k Kind) HTTPStatus() int {
	if int(k) < len(kindStatus) {
		return kindStatus[k]
	}
	return http.StatusInternalServerError
}

// KindFromStatus classifies a status code from a server that did not send a
// txfence problem document (a proxy, a load balancer, a foreign service).
func KindFromStatus(status int) Kind {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity,
		status == http.StatusRequestEntityTooLarge, status == http.StatusUnsupportedMediaType,
		status == http.StatusMethodNotAllowed:
		return Invalid
	case status == http.StatusNotFound, status == http.StatusGone:
		return NotFound
	case status == http.StatusConflict, status == http.StatusPreconditionFailed:
		return Conflict
	case status == http.StatusUnauthorized:
		return Unauthorized
	case status == http.StatusForbidden:
		return Forbidden
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status == http.StatusBadGateway, status == http.StatusServiceUnavailable,
		status == http.StatusGatewayTimeout, status == http.StatusRequestTimeout:
		return Unavailable
	case status >= 400 && status < 500:
		return Invalid
	default:
		return Internal
	}
}

// ProblemFor builds the problem document answering err. Unclassified and
// Internal errors say only "internal error": their details belong in the log.
func ProblemFor(err error) Problem {
	kind := KindOf(err)
	p := Problem{
		Type:   typePrefix + kind.String(),
		Title:  http.StatusText(kind.HTTPStatus()),
		Status: kind.HTTPStatus(),
		Detail: publicMessage(err),
	}
	if kind == Internal {
		p.Detail = "internal error"
	}
	var e *Error
	if errors.As(err, &e) && kind == Invalid {
		p.Errors = e.Fields
	}
	return p
}

// WriteProblem writes p as the response. A RateLimited or Unavailable
// problem should carry Retry-After, which the caller sets beforehand.
func WriteProblem(w http.ResponseWriter, p Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for this struct; answer something valid anyway
		body = []byte(`{"type":"` + typePrefix + `internal","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// maxProblemBody bounds how much of an error response a client reads.
const maxProblemBody = 64 << 10

// FromResponse turns a non-2xx response into an *Error whose kind is the one
// the server raised: from the problem type when the server is a txfence
// service, else from the status code. It reads and closes nothing; the
// caller closes resp.Body.
func FromResponse(resp *http.Response) error {
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
	if readErr != nil {
		return Wrap(Unavailable, fmt.Sprintf("read %d response", resp.StatusCode), readErr)
	}
	return FromBody(resp.StatusCode, resp.Header.Get("Content-Type"), body)
}

// FromBody is FromResponse for a body already read, as generated clients
// that parse responses hold it.
func FromBody(status int, contentType string, body []byte) error {
	kind := KindFromStatus(status)
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var p Problem
	if (mediaType == ProblemContentType || mediaType == "application/json") && json.Unmarshal(body, &p) == nil && p.Type != "" {
		return FromProblem(status, p)
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Kind: kind, Message: fmt.Sprintf("status %d: %s", status, msg)}
}

// FromUpstream is FromBody for one txfence service's answer to another
// over mutual TLS. A 401 or 403 there refuses the calling service's own
// identity, which is the deployment's fault and never the end caller's:
// it becomes Internal, so that a client of the gateway is not told its
// key was refused when txmanager refused the gateway's certificate. Every
// internal client reads answers through it, so the rule lives here alone.
func FromUpstream(status int, contentType string, body []byte) error {
	err := FromBody(status, contentType, body)
	if Is(err, Unauthorized) || Is(err, Forbidden) {
		return Wrap(Internal, "", fmt.Errorf("the service refused this one's identity: %w", err))
	}
	return err
}

// FromProblem turns a decoded problem document back into an *Error.
func FromProblem(status int, p Problem) error {
	kind := KindFromStatus(status)
	if name, ok := strings.CutPrefix(p.Type, typePrefix); ok {
		if k, ok := ParseKind(name); ok {
			kind = k
		}
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	return &Error{Kind: kind, Message: msg, Fields: p.Errors}
}

// Package flashbots is the client side of Flashbots-style private relays
// and builders: the X-Flashbots-Signature request signature, the JSON-RPC
// methods for private transactions (eth_sendPrivateTransaction,
// eth_cancelPrivateTransaction), MEV-Share bundles (mev_sendBundle v0.1)
// and classic bundles (eth_sendBundle), and the Protect transaction status
// API (GET /tx/<hash>).
//
// The wire types are written here from Flashbots' public documentation.
// The reference implementation, github.com/flashbots/mev-share-node
// (AGPL-3.0), is imported by tests only, to check what this package emits
// against it, so none of it is linked into mevrouterd.
package flashbots

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// maxAnswer bounds what is read of a relay's answer. Every answer here is
// a hash, a flag or a small status object; a larger one is a fault, and a
// hostile or broken relay must not make us buffer without limit.
const maxAnswer = 1 << 20

// defaultHTTP is used when Client.HTTP is nil: a relay that does not answer
// within this time is treated as down (the error is Temporary).
var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// requestID numbers JSON-RPC requests process-wide, so a request can be
// found in a relay's answer or logs; nothing here depends on its value.
var requestID atomic.Uint64

// Client calls one relay (or builder) endpoint. Its zero value is not
// usable: URL and AuthKey are required for the JSON-RPC methods. A Client
// is safe for concurrent use and may be copied.
type Client struct {
	// URL is the JSON-RPC endpoint, e.g. https://relay.flashbots.net.
	URL string
	// StatusURL is the base of the transaction status API: TxStatus calls
	// GET StatusURL/tx/<hash>. Empty means URL. Flashbots serves it on
	// another host than the relay (https://protect.flashbots.net).
	StatusURL string
	// AuthKey signs every JSON-RPC request body (SignatureHeader). It is
	// the relay identity of this service: relays keep reputation by its
	// address and let only it cancel what it sent. It must be a dedicated
	// key that holds no funds and never signs transactions: Sign hands
	// anyone who controls a request body a personal_sign signature by it
	// (see Sign), which must never be mistaken for a wallet's consent.
	AuthKey *ecdsa.PrivateKey
	// HTTP sends the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// call sends one JSON-RPC request with param as its only parameter (every
// relay method here takes one object), signed over the exact bytes sent,
// and decodes the result into result.
func (c *Client) call(ctx context.Context, method string, param, result any) error {
	if c.AuthKey == nil {
		return fmt.Errorf("%s to %s: no AuthKey to sign the request with", method, redact(c.URL))
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: requestID.Add(1), Method: method, Params: []any{param}})
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	sig, err := Sign(c.AuthKey, body)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s to %s: %w", method, redact(c.URL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(SignatureHeader, sig)

	status, payload, err := c.do(req, method)
	if err != nil {
		return err
	}
	var answer rpcAnswer
	decodeErr := json.Unmarshal(payload, &answer)
	if decodeErr == nil && len(answer.Error) > 0 && !bytes.Equal(answer.Error, []byte("null")) {
		return answerError(c.URL, method, status, answer.Error)
	}
	if status < 200 || status > 299 {
		return refusal(c.URL, method, status, payload)
	}
	if decodeErr != nil {
		return malformed(c.URL, method, status, fmt.Sprintf("answer is not a JSON-RPC object: %v", decodeErr))
	}
	if len(answer.Result) == 0 || bytes.Equal(answer.Result, []byte("null")) {
		return malformed(c.URL, method, status, "answer has neither result nor error")
	}
	if err := json.Unmarshal(answer.Result, result); err != nil {
		return malformed(c.URL, method, status, fmt.Sprintf("result %s: %v", clip(string(answer.Result)), err))
	}
	return nil
}

// do sends req and reads at most maxAnswer bytes of the answer.
func (c *Client) do(req *http.Request, method string) (int, []byte, error) {
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, &RelayError{URL: redact(req.URL.String()), Method: method, Err: stripURL(err)}
	}
	defer resp.Body.Close()
	payload, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return 0, nil, &RelayError{URL: redact(req.URL.String()), Method: method, HTTPStatus: resp.StatusCode, Err: err}
	}
	if len(payload) > maxAnswer {
		return 0, nil, &RelayError{URL: redact(req.URL.String()), Method: method, HTTPStatus: resp.StatusCode,
			Message: fmt.Sprintf("answer exceeds %d bytes", maxAnswer)}
	}
	return resp.StatusCode, payload, nil
}

// answerError reads the error member of an answer: a JSON-RPC error
// object, or the plain string of Flashbots' {"error": "..."} shape.
func answerError(endpoint, method string, status int, raw json.RawMessage) error {
	e := &RelayError{URL: redact(endpoint), Method: method, HTTPStatus: status}
	var text string
	var obj struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	switch {
	case json.Unmarshal(raw, &text) == nil:
		e.Message = clip(text)
	case json.Unmarshal(raw, &obj) == nil:
		e.Code, e.Message = obj.Code, obj.Message
		if len(obj.Data) > 0 && !bytes.Equal(obj.Data, []byte("null")) {
			e.Message += " (data: " + string(obj.Data) + ")"
		}
		e.Message = clip(e.Message)
	default:
		e.Message = clip(string(raw))
	}
	if e.Message == "" {
		e.Message = "(no message)"
	}
	return e
}

// refusal is a non-2xx answer without an error member: a proxy's page, an
// empty body or plain text.
func refusal(endpoint, method string, status int, payload []byte) error {
	msg := string(bytes.TrimSpace(payload))
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &RelayError{URL: redact(endpoint), Method: method, HTTPStatus: status, Message: clip(msg)}
}

// malformed is an answer that is not what the protocol promises.
func malformed(endpoint, method string, status int, msg string) error {
	return &RelayError{URL: redact(endpoint), Method: method, HTTPStatus: status, Message: msg}
}

// redact keeps the scheme and host of an endpoint for messages and logs:
// relay and builder endpoints often carry an API key in the path, query or
// user info.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable relay URL)"
	}
	return u.Scheme + "://" + u.Host
}

// stripURL drops the *url.Error wrapper, whose message repeats the full
// URL (see redact); the cause stays reachable for errors.Is and As.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

package txctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/openapi/components"
)

// EnvWebhookSecret holds the secrets webhooks listen verifies with when
// no --secret is given, comma- or space-separated.
const EnvWebhookSecret = "TXCTL_WEBHOOK_SECRET"

const listenAbout = `A local webhook receiver for development and debugging; it is not a
production receiver. It verifies every POST as Standard Webhooks says:
the webhook-signature header must hold a v1 signature of the webhook-id,
the webhook-timestamp and the body made with one of the secrets given
(during a rotation give each live one), and the webhook-timestamp must be
within 5 minutes of this machine's clock.

A verified delivery is answered 204, so the gateway marks it delivered,
and printed on standard output: one line per delivery, or with --json its
body as it came, one per line. Anything else is answered 401 (405 when
not a POST, 404 off --path, 413 over 1 MiB) and explained on standard
error; the gateway retries it. Delivery is at least once: a webhook-id
already printed is printed again marked (repeat), and a real receiver
must drop such duplicates.

The secret is the one webhooks create (or rotate-secret) showed once. It
is better in TXCTL_WEBHOOK_SECRET (several comma-separated) than in
--secret, which shows in ps. Subscribe the listener with webhooks create
--url, or point a subscription at it with webhooks update --url; webhooks
test then sends it a test delivery.

listen runs until interrupted (exit 0) or until --count verified
deliveries, repeats included (exit 0). --timeout (none by default) ending
it first, or an interruption before --count, exits 1.`

// Limits of webhooks listen.
const (
	// maxDeliveryBody bounds a delivery's body; the gateway's are far
	// smaller.
	maxDeliveryBody = 1 << 20
	// listenShutdown bounds the wait for answers under way when the
	// listener stops.
	listenShutdown = 5 * time.Second
)

func defineWebhookListen(fs *flag.FlagSet) func(*env, []string) error {
	var addr, path string
	var secrets multiFlag
	var count int
	fs.StringVar(&addr, "addr", "127.0.0.1:9999", "listen on `HOST:PORT` (port 0 picks a free one, printed at start)")
	fs.Var(&secrets, "secret", "verify with this `SECRET`, whsec_... (repeatable: a delivery passes when any verifies it; "+
		"default $"+EnvWebhookSecret+")")
	fs.StringVar(&path, "path", "/", "accept deliveries on this `PATH` only (404 elsewhere); / accepts any")
	fs.IntVar(&count, "count", 0, "exit after `N` verified deliveries; 0 runs until interrupted")
	return func(x *env, _ []string) error {
		const cmd = "webhooks listen"
		if len(secrets) == 0 {
			secrets = strings.FieldsFunc(x.getenv(EnvWebhookSecret), func(r rune) bool { return r == ',' || r == ' ' })
		}
		if len(secrets) == 0 {
			return usagef(cmd, "webhooks listen needs --secret (or %s): the whsec_... secret webhooks create showed", EnvWebhookSecret)
		}
		if count < 0 {
			return usagef(cmd, "--count %d: want 0 (no limit) or more", count)
		}
		if !strings.HasPrefix(path, "/") {
			return usagef(cmd, "--path %q: want a path starting with /", path)
		}
		l := &listener{x: x, path: path, count: count, seen: map[string]bool{}, stop: make(chan struct{})}
		for i, s := range secrets {
			wh, err := standardwebhooks.NewWebhook(s)
			if err != nil || strings.TrimPrefix(s, "whsec_") == "" {
				// Never the secret itself: it would end up in logs.
				return usagef(cmd, "secret %d of %d is not a whsec_<base64> secret", i+1, len(secrets))
			}
			l.verifiers = append(l.verifiers, wh)
		}
		return l.run(addr)
	}
}

// listener is a running webhooks listen.
type listener struct {
	x         *env
	verifiers []*standardwebhooks.Webhook
	path      string
	count     int

	// mu orders the output and guards what follows.
	mu sync.Mutex
	// verified counts the verified deliveries, repeats included.
	verified int
	// seen holds the webhook-ids printed, to mark repeats.
	seen map[string]bool
	// stop is closed when the listener is to stop: --count reached, or
	// the output failed (err).
	stop    chan struct{}
	stopped bool
	err     error
}

func (l *listener) run(addr string) error {
	ln, err := (&net.ListenConfig{}).Listen(l.x.ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("webhooks listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	hook := l.path
	if hook == "/" {
		hook = "/hook"
	}
	l.x.note("listening on %s (verifying %d secret(s)); subscribe it with: txctl webhooks create --url %s%s",
		base, len(l.verifiers), base, hook)

	srv := &http.Server{
		Handler:           l,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		ErrorLog:          log.New(l.x.stderr, "txctl: webhooks listen: ", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-l.x.ctx.Done():
	case <-l.stop:
	case err := <-served:
		return fmt.Errorf("webhooks listen: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.x.ctx), listenShutdown)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	<-served

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return l.err
	case l.count > 0 && l.verified >= l.count:
		return nil
	case errors.Is(l.x.ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("webhooks listen: %d verified deliveries within %s (--timeout)", l.verified, l.x.timeout)
	case l.count > 0:
		return fmt.Errorf("webhooks listen: interrupted after %d of %d verified deliveries", l.verified, l.count)
	}
	return nil
}

// ServeHTTP answers one delivery.
func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(standardwebhooks.HeaderWebhookID)
	refuse := func(status int, why string) {
		what := r.Method + " " + r.URL.Path + " from " + r.RemoteAddr
		if id != "" {
			what += " (webhook-id " + id + ")"
		}
		l.warn("refused %s: %d %s: %s", what, status, http.StatusText(status), why)
		http.Error(w, why, status)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, "deliveries are POSTs")
		return
	}
	if l.path != "/" && r.URL.Path != l.path {
		refuse(http.StatusNotFound, "this listener takes deliveries on "+l.path)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDeliveryBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", maxDeliveryBody))
		} else {
			refuse(http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return
	}
	if err := l.verify(body, r.Header); err != nil {
		refuse(http.StatusUnauthorized, err.Error())
		return
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		// Not printed, so not to be taken: the gateway sends it again.
		http.Error(w, "the listener is stopping", http.StatusServiceUnavailable)
		return
	}
	repeat := l.seen[id]
	l.seen[id] = true
	if err := l.print(id, body, repeat); err != nil {
		http.Error(w, "the listener cannot print", http.StatusInternalServerError)
		l.err = fmt.Errorf("webhooks listen: print a delivery: %w", err)
		l.stopLocked()
		return
	}
	w.WriteHeader(http.StatusNoContent)
	l.verified++
	if l.count > 0 && l.verified >= l.count {
		l.stopLocked()
	}
}

// verify checks the delivery against each secret in turn, and says why
// none verifies it.
func (l *listener) verify(body []byte, h http.Header) error {
	var err error
	for _, wh := range l.verifiers {
		if err = wh.Verify(body, h); err == nil {
			return nil
		}
		if !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			break // the headers or the timestamp: the same for every secret
		}
	}
	switch {
	case errors.Is(err, standardwebhooks.ErrRequiredHeaders):
		return errors.New("the webhook-id, webhook-timestamp or webhook-signature header is missing")
	case errors.Is(err, standardwebhooks.ErrInvalidHeaders):
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", h.Get(standardwebhooks.HeaderWebhookTimestamp))
	case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
		return fmt.Errorf("webhook-timestamp %s is more than 5 minutes from this clock: a replay, or clocks apart",
			h.Get(standardwebhooks.HeaderWebhookTimestamp))
	case errors.Is(err, standardwebhooks.ErrNoMatchingSignature):
		return fmt.Errorf("no signature verifies with the %d secret(s) given: another subscription's secret, or an altered body",
			len(l.verifiers))
	}
	return fmt.Errorf("signature not verified: %w", err)
}

// print writes a verified delivery; l.mu is held.
func (l *listener) print(id string, body []byte, repeat bool) error {
	if l.x.json {
		if !json.Valid(body) {
			l.warnLocked("delivery %s is verified but its body is not JSON; not printed", id)
			return nil
		}
		if repeat {
			l.warnLocked("delivery %s is a repeat", id)
		}
		return l.x.jsonLine(body)
	}
	line := describeDelivery(id, body)
	if repeat {
		line += "  (repeat: webhook-id seen before)"
	}
	_, err := fmt.Fprintln(l.x.stdout, line)
	return err
}

// describeDelivery is one line of webhooks listen's text output: the
// webhook-id, then the event as watch prints it and whose it is.
func describeDelivery(id string, body []byte) string {
	var e components.Event
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Sprintf("%s  (a body that is not an event: %d bytes)", id, len(body))
	}
	if !e.Type.Valid() { // webhook.test, or a type newer than this txctl
		return fmt.Sprintf("%s  %s  %s", id, formatTime(e.CreatedAt), e.Type)
	}
	return fmt.Sprintf("%s  %s  signer=%d:%s", id, describeEvent(e), e.ChainId, e.Signer)
}

// stopLocked tells run to stop; l.mu is held.
func (l *listener) stopLocked() {
	if !l.stopped {
		l.stopped = true
		close(l.stop)
	}
}

func (l *listener) warn(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warnLocked(format, args...)
}

func (l *listener) warnLocked(format string, args ...any) {
	l.x.note("webhooks listen: "+format, args...)
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
)

// streamPage is how many feed events one read of a stream takes.
const streamPage = 500

// streamPace is the least time between two reads of the feed hub by one
// stream: the first event after a quiet spell goes out at once, and a
// burst goes out in pages, one wake, one write and one flush each, rather
// than one per commit the feed reader wakes for, times every open stream.
const streamPace = 20 * time.Millisecond

// streamEvents serves the caller's events as Server-Sent Events. Each
// stream reads the feed from its own position through the process's one
// reader (Config.Events), so a resumed stream misses nothing and repeats
// nothing, whatever happened while it was away. The feed holds every
// tenant's events; the stream passes on only those of the signers the
// key may use.
func (a *API) streamEvents(w http.ResponseWriter, r *http.Request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errs.E(errs.Internal, "this connection cannot stream")
	}
	p := caller(r.Context())
	q := r.URL.Query()
	var types map[string]bool
	if v := q.Get("types"); v != "" {
		types = map[string]bool{}
		for _, t := range strings.Split(v, ",") {
			types[t] = true
		}
	}
	after, err := streamStart(r)
	if err != nil {
		return err
	}
	release, err := a.streams.take(p.key.ID, p.tenant.ID)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		return err
	}
	defer release()
	// The stream lives only while its key does: revoked or expired, the
	// stream ends within StreamRecheck (and the key cache's lifetime on
	// other nodes than the one that revoked it).
	ctx, endStream := context.WithCancelCause(r.Context())
	defer endStream(nil)
	token, _ := bearerToken(r)
	go a.watchStreamKey(ctx, token, endStream)
	if after == math.MaxInt64 { // no position given: start with the next event
		if after, err = a.cfg.Events.Head(ctx); err != nil {
			return errs.Wrap(errs.Unavailable, "the event feed has not been read yet", err)
		}
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	w.WriteHeader(http.StatusOK)
	// The position first, as an id-only message: a client that drops
	// before its first event still resumes from here, not from its own
	// later start (EventSource keeps the id of a message without data).
	_, _ = fmt.Fprintf(w, ": txfence events\nid: %d\n\n", after)
	flusher.Flush()
	lastWrite := time.Now()
	pace := time.NewTimer(streamPace)
	pace.Stop() // armed after each write of events

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Done:
			return nil
		default:
		}
		// A keep-alive comment follows each StreamWait without an event,
		// so that proxies do not close an idle stream.
		events, err := a.cfg.Events.Next(ctx, after, streamPage, a.cfg.StreamWait)
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errKeyGone) {
				_, _ = fmt.Fprintf(w, "event: error\ndata: {\"detail\":\"the API key of this stream was revoked or has expired\"}\n\n")
				flusher.Flush()
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			// The client reconnects with Last-Event-ID and resumes; an
			// event line cannot carry a problem document.
			a.cfg.Log.Warn("event stream ends: the feed failed", "key_id", p.key.ID, "after", after, "err", err)
			_, _ = fmt.Fprintf(w, "event: error\ndata: {\"detail\":\"the event feed is unavailable; reconnect with Last-Event-ID\"}\nretry: 2000\n\n")
			flusher.Flush()
			return nil
		}
		sent := 0 // messages written, keep-alive included
		for _, e := range events {
			after = uint64(e.Seq)
			signer := gateway.SignerRef{ChainID: uint64(e.ChainId), Address: common.HexToAddress(e.Signer)}
			if !p.mayUse(signer) || (types != nil && !types[string(e.Type)]) {
				continue
			}
			if _, err := w.Write(e.Message); err != nil {
				return nil
			}
			sent++
		}
		if sent == 0 && time.Since(lastWrite) >= a.cfg.StreamWait {
			// Keep-alive, and proof to the client that the stream lives.
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			sent++
		}
		if sent > 0 { // else other tenants' events only: nothing to say yet
			flusher.Flush()
			lastWrite = time.Now()
		}
		if len(events) > 0 {
			pace.Reset(streamPace)
			select {
			case <-ctx.Done():
				return nil
			case <-pace.C:
			}
		}
	}
}

// errKeyGone ends a stream whose key no longer authenticates.
var errKeyGone = errors.New("the stream's key was revoked or has expired")

// watchStreamKey checks every StreamRecheck that token still
// authenticates, through the key cache (one lookup per key per cache
// lifetime, however many streams it has), and ends the stream when it
// does not.
func (a *API) watchStreamKey(ctx context.Context, token string, end context.CancelCauseFunc) {
	tick := time.NewTicker(a.cfg.StreamRecheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := a.keys.principal(ctx, token); errs.Is(err, errs.Unauthorized) {
			end(errKeyGone)
			return
		}
	}
}

// streamStart is the seq a stream starts after: Last-Event-ID, else
// after, else math.MaxInt64 for "from now on".
func streamStart(r *http.Request) (uint64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return 0, errs.InvalidFields("Last-Event-ID is not an event id", errs.FieldError{Pointer: "Last-Event-ID", Detail: "a seq, 0 or more"})
		}
		return n, nil
	}
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return 0, errs.InvalidFields("after is not a seq", errs.FieldError{Pointer: "after", Detail: "a seq, 0 or more"})
		}
		return n, nil
	}
	return math.MaxInt64, nil
}

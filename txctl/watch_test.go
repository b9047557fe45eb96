package txctl_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi/components"
)

// event is a line of 'watch --json': the API's event, and the state its
// data moves the transaction to, for the event types that move it.
type event struct {
	components.Event
	ToState components.TxState
}

// TestWatch follows transactions through the event stream: until a
// final state, across dropped connections (resumed with Last-Event-ID,
// nothing lost or repeated), and to the exit status of a failure.
func TestWatch(t *testing.T) {
	t.Parallel()
	// carol rejects a transaction: a rejection is signed, and checked
	// against the policy's approvers.
	carolKey := filepath.Join(t.TempDir(), "carol.key")
	g := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: approverPolicy(t, map[string]ed25519.PublicKey{"carol": writeApproverKey(t, carolKey, "carol", 0o600)})})

	t.Run("until final", func(t *testing.T) {
		tx := g.Create(t, g.Acme, signerA, "watched")
		w := startTxctl(t, g.URL, g.AcmeRead, "--json", "watch", tx.TxID, "--until-final")
		// The INIT event comes from the timeline, read once the stream is
		// open: the cancel below happens while watch streams.
		w.stdout.waitFor(t, "the INIT event", func(s string) bool { return len(lines(s)) == 1 })
		cancelTx(t, g, tx.TxID)
		if code := w.wait(t); code != 0 {
			t.Fatalf("watch --until-final of a cancelled transaction: exit %d\n%s", code, w.stderr.String())
		}
		events := eventsOf(t, w.stdout.String())
		if len(events) != 2 || events[0].ToState != "INIT" || events[1].ToState != "CANCELLED" || events[0].TxId != tx.TxID {
			t.Errorf("watch printed %+v, want INIT and CANCELLED of %s", events, tx.TxID)
		}
		for _, l := range lines(w.stdout.String()) {
			conforms(t, l, "/api/v1/tx/{tx_id}/events", "GET", 200, "events")
		}

		// Text output, and a transaction already final: its timeline,
		// then exit at once.
		text := mustRun(t, g.URL, g.AcmeRead, "watch", tx.TxID, "--until-final").stdout
		if got := lines(text); len(got) != 2 || !strings.Contains(got[0], "tx.state_changed") || !strings.Contains(got[1], "INIT -> CANCELLED") ||
			!strings.Contains(got[1], `reason="cancel_requested"`) {
			t.Errorf("watch as text:\n%s", text)
		}
	})

	t.Run("resumes a transaction after a drop", func(t *testing.T) {
		p := newCutProxy(t, g.URL)
		tx := g.Create(t, g.Acme, signerA, "dropped")
		w := startTxctl(t, p.URL, g.AcmeRead, "--json", "watch", tx.TxID, "--until-final")
		w.stdout.waitFor(t, "the INIT event", func(s string) bool { return len(lines(s)) == 1 })
		// Cut the stream and keep txctl out while the transaction is
		// cancelled: the event happens while no connection is open.
		p.cutAndHold()
		cancelTx(t, g, tx.TxID)
		p.release()
		if code := w.wait(t); code != 0 {
			t.Fatalf("watch after a drop: exit %d\n%s", code, w.stderr.String())
		}
		events := eventsOf(t, w.stdout.String())
		if len(events) != 2 || events[0].ToState != "INIT" || events[1].ToState != "CANCELLED" {
			t.Errorf("watch printed %+v across the drop, want INIT and CANCELLED once each", events)
		}
		// The stream had carried no event yet: txctl resumed after the
		// last event it printed, or from the position the stream's
		// id-only opening message gave it, whichever is later; both are
		// the INIT here.
		reqs := p.streamRequests()
		seq := strconv.FormatInt(events[0].Seq, 10)
		if len(reqs) < 2 || (reqs[1].after != seq && reqs[1].lastEventID != seq) {
			t.Errorf("stream requests %+v: the reconnection should start after %d", reqs, events[0].Seq)
		}
		if !strings.Contains(w.stderr.String(), "reconnecting") {
			t.Errorf("no word of the drop on stderr: %s", w.stderr.String())
		}
	})

	t.Run("resumes every event with Last-Event-ID", func(t *testing.T) {
		p := newCutProxy(t, g.URL)
		w := startTxctl(t, p.URL, g.AcmeRead, "--json", "watch")
		p.waitStreams(t, 1)
		first := g.Create(t, g.Acme, signerA, "before-the-drop")
		w.stdout.waitFor(t, "the first event", func(s string) bool { return strings.Contains(s, first.TxID) })

		p.cutAndHold()
		during := g.Create(t, g.Acme, signerA, "during-the-drop")
		cancelTx(t, g, during.TxID)
		g.Create(t, g.Globex, signerB, "not-acme's")
		p.release()
		after := g.Create(t, g.Acme, signerA, "after-the-drop")
		out := w.stdout.waitFor(t, "the events after the drop", func(s string) bool { return strings.Contains(s, after.TxID) })

		events := eventsOf(t, out)
		want := []struct{ tx, state string }{{first.TxID, "INIT"}, {during.TxID, "INIT"}, {during.TxID, "CANCELLED"}, {after.TxID, "INIT"}}
		if len(events) != len(want) {
			t.Fatalf("watch printed %+v, want %v", events, want)
		}
		for i, e := range events {
			if e.TxId != want[i].tx || string(e.ToState) != want[i].state || (i > 0 && e.Seq <= events[i-1].Seq) {
				t.Errorf("event %d: %+v, want %v in seq order", i, e, want[i])
			}
		}
		reqs := p.streamRequests()
		if len(reqs) < 2 || reqs[0].lastEventID != "" || reqs[1].lastEventID != strconv.FormatInt(events[0].Seq, 10) {
			t.Errorf("stream requests %+v: the reconnection should carry Last-Event-ID %d", reqs, events[0].Seq)
		}
	})

	t.Run("a failure exits 3, a timeout 1", func(t *testing.T) {
		tx := g.Create(t, g.Acme, signerA, "rejected")
		pendingApproval(t, g, tx.TxID)
		mustRun(t, g.URL, g.Acme, "reject", tx.TxID, "--key-file", carolKey, "--yes")
		r := txctlRun(t, g.URL, g.AcmeRead, "watch", tx.TxID, "--until-final")
		if r.code != 3 || !strings.Contains(r.stdout, "PENDING_APPROVAL -> FAILED") || !strings.Contains(r.stderr, "ended FAILED (approval_rejected)") {
			t.Errorf("watch of a rejected transaction: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}

		open := g.Create(t, g.Acme, signerA, "never-final")
		r = txctlRun(t, g.URL, g.AcmeRead, "--timeout", "1s", "watch", open.TxID, "--until-final")
		if r.code != 1 || !strings.Contains(r.stderr, "no final state within 1s") || len(lines(r.stdout)) != 1 {
			t.Errorf("watch with a timeout: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if r := txctlRun(t, g.URL, g.Globex, "watch", open.TxID); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
			t.Errorf("globex watches acme's transaction: exit %d %s", r.code, r.stderr)
		}
		if r := txctlRun(t, g.URL, g.AcmeRead, "watch", "--until-final"); r.code != 2 {
			t.Errorf("--until-final without an ID: exit %d %s", r.code, r.stderr)
		}
	})
}

func cancelTx(t *testing.T, g *gatewaystack.Gateway, id string) {
	t.Helper()
	if resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx/"+id+"/cancel", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel %s: %d %s", id, resp.StatusCode, b)
	}
}

func eventsOf(t *testing.T, out string) []event {
	t.Helper()
	var events []event
	for _, l := range lines(out) {
		e := event{Event: decodeJSON[components.Event](t, l)}
		switch e.Type {
		case components.EventTxStateChanged:
			e.ToState = decodeJSON[components.TxStateChangedData](t, string(e.Data)).ToState
		case components.EventTxReorged:
			e.ToState = decodeJSON[components.TxReorgedData](t, string(e.Data)).ToState
		}
		events = append(events, e)
	}
	return events
}

// streamRequest is what one connection to the event stream asked for.
type streamRequest struct {
	lastEventID, after string
}

// cutProxy stands between txctl and the gateway and can cut the event
// streams passing through it, as a load balancer or a network would, and
// hold new ones back for a while.
type cutProxy struct {
	URL    string
	target *url.URL
	rp     *httputil.ReverseProxy

	mu       sync.Mutex
	requests []streamRequest
	// opened counts the streams the gateway has answered.
	opened int
	// cut is closed to cut the streams open now.
	cut chan struct{}
	// hold, while set, keeps new streams waiting until it is closed.
	hold    chan struct{}
	changed chan struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: u, rp: httputil.NewSingleHostReverseProxy(u), cut: make(chan struct{}), changed: make(chan struct{}, 1)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/events" {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	hold := p.hold
	p.requests = append(p.requests, streamRequest{lastEventID: r.Header.Get("Last-Event-ID"), after: r.URL.Query().Get("after")})
	p.mu.Unlock()
	p.notify()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	p.mu.Lock()
	p.opened++
	p.mu.Unlock()
	p.notify()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush()

	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-cut:
			// Abort the client's connection mid-stream, as a network
			// failure would: no clean end of the response.
			cancel()
			panic(http.ErrAbortHandler)
		case line, ok := <-lines:
			if !ok {
				return
			}
			if _, err := w.Write([]byte(line)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}
}

func (p *cutProxy) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// cutAndHold cuts every open stream and holds new ones back.
func (p *cutProxy) cutAndHold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.cut)
	p.cut = make(chan struct{})
	p.hold = make(chan struct{})
}

// release lets the held streams through.
func (p *cutProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.hold)
	p.hold = nil
}

func (p *cutProxy) streamRequests() []streamRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]streamRequest{}, p.requests...)
}

// waitStreams waits until the gateway has answered n streams: the last
// one's start is fixed.
func (p *cutProxy) waitStreams(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		opened := p.opened
		p.mu.Unlock()
		if opened >= n {
			return
		}
		select {
		case <-p.changed:
		case <-deadline.C:
			t.Fatalf("no stream %d within %s", n, waitLimit)
		}
	}
}

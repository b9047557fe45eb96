package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/testinfra/wait"
)

// sseEvent is one message of an event stream.
type sseEvent struct{ id, typ, data string }

// openStream connects to /api/v1/events with key and headers (name,
// value pairs) and returns the messages as they arrive.
func openStream(r *gatewaystack.Gateway, t *testing.T, key, query string, headers ...string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", r.URL+"/api/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.data != "" { // an id-only message moves the position, no event
					out <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
	}()
	return out
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
	}
	return sseEvent{}
}

// TestEventStreamResumesAndKeepsTenantsApart: a stream carries its
// tenant's events only, in order, from the next one on; reconnecting with
// Last-Event-ID resumes exactly after it, and types filters.
func TestEventStreamResumesAndKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	before := r.Create(t, r.Acme, signerA, "before-the-stream")
	acme := openStream(r, t, r.AcmeRead, "")
	globex := openStream(r, t, r.Globex, "")

	mine := r.Create(t, r.Acme, signerA, "a-1")
	r.Create(t, r.Globex, signerB, "g-1")
	if _, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+mine.TxID+"/cancel", ""); !strings.Contains(string(b), "CANCELLED") {
		t.Fatalf("cancel: %s", b)
	}
	first, second := next(t, acme), next(t, acme)
	if strings.Contains(first.data, before.TxID) {
		t.Errorf("a stream without a position replayed the past: %+v", first)
	}
	if first.typ != "tx.state_changed" || !strings.Contains(first.data, mine.TxID) || !strings.Contains(first.data, `"to_state":"INIT"`) ||
		!strings.Contains(second.data, `"to_state":"CANCELLED"`) {
		t.Fatalf("acme's stream: %+v %+v", first, second)
	}
	if g := next(t, globex); strings.Contains(g.data, mine.TxID) || !strings.Contains(strings.ToLower(g.data), strings.ToLower(signerB)) {
		t.Errorf("globex's stream carries %+v", g)
	}

	// Resume after the first: the second again, then what came since,
	// and nothing of globex's.
	r.Create(t, r.Globex, signerB, "g-2")
	third := r.Create(t, r.Acme, signerA, "a-2")
	resumed := openStream(r, t, r.AcmeRead, "", "Last-Event-ID", first.id)
	if e := next(t, resumed); e.id != second.id {
		t.Errorf("resumed with %+v, want %s", e, second.id)
	}
	if e := next(t, resumed); !strings.Contains(e.data, third.TxID) {
		t.Errorf("then %+v, want %s's INIT", e, third.TxID)
	}
	// after= does the same for clients that cannot set headers; types
	// filters.
	filtered := openStream(r, t, r.AcmeRead, "?after=0&types=tx.state_changed")
	if e := next(t, filtered); !strings.Contains(e.data, before.TxID) {
		t.Errorf("after=0 starts with %+v, want the first of acme's", e)
	}
	none := openStream(r, t, r.AcmeRead, "?after=0&types=tx.confirmation")
	r.Create(t, r.Acme, signerA, "a-3")
	select {
	case e := <-none:
		t.Errorf("a confirmation-only stream carried %+v", e)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestStreamsAreCappedAndEndWithTheirKey: a key holds at most its cap of
// open streams on a node (429 with Retry-After past it, while another key
// still opens one, and a closed stream frees its slot); a stream whose key
// is revoked ends with an error event within the re-check interval.
func TestStreamsAreCappedAndEndWithTheirKey(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{StreamsPerKey: 2, StreamRecheck: 100 * time.Millisecond})
	open := func(key string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, "GET", r.URL+"/api/v1/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, cancel
	}
	first, closeFirst := open(r.AcmeRead)
	second, _ := open(r.AcmeRead)
	third, _ := open(r.AcmeRead)
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("streams within the cap: %d %d", first.StatusCode, second.StatusCode)
	}
	if third.StatusCode != http.StatusTooManyRequests || third.Header.Get("Retry-After") == "" {
		t.Errorf("a third stream of a key capped at 2: %d %v", third.StatusCode, third.Header)
	}
	if other, _ := open(r.Globex); other.StatusCode != http.StatusOK {
		t.Errorf("another key's stream: %d", other.StatusCode)
	}
	closeFirst()
	var reopened int
	wait.ForDescribed(t, 30*time.Second, func() bool {
		resp, cancel := open(r.AcmeRead)
		if reopened = resp.StatusCode; reopened == http.StatusOK {
			cancel()
			return true
		}
		return false
	}, func() string { return fmt.Sprintf("a stream after one was closed, answered %d", reopened) })

	// Revoked: the open stream ends with an error event.
	_, token, err := r.Store.CreateKey(context.Background(), gateway.NewKey{Tenant: r.AcmeTenant.ID, Name: "streamer", Scopes: []gateway.Scope{gateway.ScopeTxRead}})
	if err != nil {
		t.Fatal(err)
	}
	events := openStream(r, t, token, "")
	keys, err := r.Store.Keys(context.Background(), r.AcmeTenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == "streamer" {
			if resp, b := r.Do(t, r.Acme, "DELETE", "/api/v1/keys/"+k.ID.String(), ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("revoke: %d %s", resp.StatusCode, b)
			}
		}
	}
	e := next(t, events)
	if e.typ != "error" || !strings.Contains(e.data, "revoked") {
		t.Errorf("the revoked key's stream sent %+v, want an error event", e)
	}
	select {
	case _, open := <-events:
		if open {
			t.Error("the revoked key's stream goes on")
		}
	case <-time.After(30 * time.Second):
		t.Error("the revoked key's stream did not end")
	}
}

// TestTwoHundredStreamsMeetTheCaps: 200 streams opened at once with one
// key get the key's cap (5) and 429 with Retry-After for the rest, and the
// streams that opened carry events; across a tenant's keys the tenant's
// cap (50) holds.
func TestTwoHundredStreamsMeetTheCaps(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 300}}
	defer client.CloseIdleConnections()
	type opened struct {
		status     int
		retryAfter string
		body       io.ReadCloser
	}
	openAll := func(keys []string) []opened {
		out := make([]opened, len(keys))
		var wg sync.WaitGroup
		for i, key := range keys {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/api/v1/events", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = opened{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Body}
				if resp.StatusCode != http.StatusOK {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		return out
	}
	count := func(streams []opened) (ok, capped int) {
		for _, s := range streams {
			switch {
			case s.status == http.StatusOK:
				ok++
			case s.status == http.StatusTooManyRequests && s.retryAfter != "":
				capped++
			default:
				t.Errorf("a stream opened with %d (Retry-After %q)", s.status, s.retryAfter)
			}
		}
		return ok, capped
	}

	keys := make([]string, 200)
	for i := range keys {
		keys[i] = r.AcmeRead
	}
	streams := openAll(keys)
	if ok, capped := count(streams); ok != 5 || capped != 195 {
		t.Fatalf("200 streams of one key: %d opened and %d capped, want 5 and 195", ok, capped)
	}
	tx := r.Create(t, r.Acme, signerA, "seen-by-the-capped-key")
	for _, s := range streams {
		if s.status != http.StatusOK {
			continue
		}
		events := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(s.body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					events <- sc.Text()
					return
				}
			}
		}()
		select {
		case e := <-events:
			if !strings.Contains(e, tx.TxID) {
				t.Errorf("an open stream carried %s, want the event of %s", e, tx.TxID)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an open stream carried no event within 30 s")
		}
		s.body.Close()
	}

	// The tenant's cap, over twelve keys of five streams each; the key's
	// streams above have closed, and the slots come free as the server
	// notices.
	keys = keys[:0]
	for i := range 12 {
		key := r.Key(t, r.AcmeTenant, fmt.Sprintf("streamer-%d", i), []gateway.Scope{gateway.ScopeTxRead}, nil)
		for range 5 {
			keys = append(keys, key)
		}
	}
	var ok, capped int
	for deadline := time.Now().Add(30 * time.Second); ; {
		streams = openAll(keys)
		ok, capped = count(streams)
		for _, s := range streams {
			if s.status == http.StatusOK {
				s.body.Close()
			}
		}
		if ok == 50 || time.Now().After(deadline) {
			break
		}
		// Some slots of the closed streams were not free yet: try again
		// once this round's have been given back.
		<-time.After(50 * time.Millisecond)
	}
	if ok != 50 || capped != 10 {
		t.Errorf("60 streams of one tenant: %d opened and %d capped, want 50 and 10", ok, capped)
	}
}

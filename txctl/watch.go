package txctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

const watchAbout = `Prints each event of the tenant's transactions as it happens, from
GET /api/v1/events (Server-Sent Events). With an ID, only that
transaction's: first its timeline so far, then what comes.

A dropped connection is resumed where it stopped (Last-Event-ID), with a
growing delay between attempts, so no event is lost or printed twice. The
first connection is not retried: a wrong URL or key fails at once.

With --until-final (and an ID) watch exits once the transaction is in a
terminal state: status 0 for CONFIRMED or CANCELLED (what a client or an
operator asked for), 3 for REVERTED or FAILED (the intent did not happen;
the reason is printed on standard error). A transaction that is already
final prints its timeline and exits the same way. To act only on a
confirmed transaction, check the state too: a cancelled one also exits 0.
--timeout (none by default for watch) bounds the wait; when it passes,
watch exits 1. Interrupted (Ctrl-C), a watch without --until-final exits
0, one with it 1.`

// Timings of the event stream. The gateway sends a keep-alive at least
// every 15 s, so a connection silent for idleTimeout is dead even if TCP
// has not noticed.
const (
	connectTimeout = 30 * time.Second
	idleTimeout    = 45 * time.Second
	reconnectMin   = 500 * time.Millisecond
	reconnectMax   = 15 * time.Second
	// maxEventLine bounds one line of the stream.
	maxEventLine = 4 << 20
)

var terminalStates = map[components.TxState]bool{
	components.StateConfirmed: true, components.StateReverted: true,
	components.StateFailed: true, components.StateCancelled: true,
}

func defineWatch(fs *flag.FlagSet) func(*env, []string) error {
	var untilFinal bool
	var types string
	var after int64
	fs.BoolVar(&untilFinal, "until-final", false, "with an ID: exit when the transaction reaches CONFIRMED, REVERTED, FAILED or CANCELLED")
	fs.StringVar(&types, "types", "", "only these event `TYPES`, comma-separated: tx.state_changed, tx.attempt, tx.confirmation, tx.reorged")
	fs.Int64Var(&after, "after", 0, "only events after `SEQ` (without an ID the stream starts with the next event by default)")
	return func(x *env, args []string) error {
		set := given(fs)
		w := &watcher{x: x, printed: -1}
		if set["after"] {
			if after < 0 {
				return usagef("watch", "--after %d: want an event seq, 0 or more", after)
			}
			w.printed = after
		}
		if types != "" {
			w.printTypes = map[components.EventType]bool{}
			var wire []string
			for _, t := range strings.Split(types, ",") {
				et, err := enumFlag("watch", "types", strings.TrimSpace(t), components.EventType.Valid,
					components.EventTxStateChanged, components.EventTxAttempt, components.EventTxConfirmation, components.EventTxReorged)
				if err != nil {
					return err
				}
				if !w.printTypes[et] {
					w.printTypes[et] = true
					wire = append(wire, string(et))
				}
			}
			// --until-final needs the events that change the state, even
			// when they are not to be printed.
			for _, et := range []components.EventType{components.EventTxStateChanged, components.EventTxReorged} {
				if untilFinal && !w.printTypes[et] {
					wire = append(wire, string(et))
				}
			}
			w.wireTypes = strings.Join(wire, ",")
		}
		if len(args) == 0 {
			if untilFinal {
				return usagef("watch", "--until-final needs a transaction ID")
			}
			return w.watchAll()
		}
		id, err := parseID("watch", "transaction", args[0])
		if err != nil {
			return err
		}
		w.tx, w.untilFinal = &id, untilFinal
		return w.watchTx()
	}
}

// watcher follows the event stream.
type watcher struct {
	x *env
	// tx is the one transaction to follow, nil for all.
	tx         *uuid.UUID
	untilFinal bool
	// printTypes filters what is printed (nil: everything); wireTypes is
	// the types parameter sent.
	printTypes map[components.EventType]bool
	wireTypes  string

	// lastID is the id of the last event the stream completed, sent back
	// as Last-Event-ID when reconnecting.
	lastID string
	// printed is the highest seq handled: events at or below it are not
	// printed again (a transaction's timeline and the stream overlap).
	printed int64
	// retry is the reconnection delay the server asked for (retry:).
	retry time.Duration

	// timelineRead is set once the watched transaction's timeline is
	// printed: connections from then on start after it.
	timelineRead bool

	// state and reason are the watched transaction's, after the last
	// event seen.
	state  components.TxState
	reason string
}

// watchAll follows every event the key may see.
func (w *watcher) watchAll() error {
	c, err := w.connect()
	if err != nil {
		return err
	}
	return w.follow(c)
}

// watchTx prints one transaction's timeline and follows it. The stream is
// opened before the timeline is read: once the gateway has answered, the
// stream starts after a seq fixed before the read, so every event is in
// one or the other (and those in both are printed once).
func (w *watcher) watchTx() error {
	tx, _, err := w.x.getTx(*w.tx)
	if err != nil {
		return err
	}
	w.state, w.reason = tx.State, deref(tx.Reason)
	var c *sseConn
	if !(w.untilFinal && terminalStates[w.state]) {
		if c, err = w.connect(); err != nil {
			return err
		}
	}
	if err := w.timeline(); err != nil {
		if c != nil {
			c.close()
		}
		return err
	}
	if w.untilFinal && terminalStates[w.state] {
		if c != nil {
			c.close()
		}
		return w.final()
	}
	if c == nil { // final when read, reopened (a reorg) by the timeline's end
		if c, err = w.connect(); err != nil {
			return err
		}
	}
	return w.follow(c)
}

// timeline prints the transaction's events so far. The state is the one
// after the last of them: a final state that a reorg reopened later is
// not final.
func (w *watcher) timeline() error {
	resp, err := w.x.api.ListTxEventsWithResponse(w.x.ctx, *w.tx)
	if err := w.x.check("read the timeline of "+w.tx.String(), resp, err, http.StatusOK); err != nil {
		return err
	}
	// The events as sent, so that --json prints them exactly.
	var raw struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(resp.Body, &raw); err != nil || len(raw.Events) != len(resp.JSON200.Events) {
		return fmt.Errorf("read the timeline of %s: the events do not decode", w.tx)
	}
	for i, e := range resp.JSON200.Events {
		if _, err := w.handle(e, raw.Events[i]); err != nil {
			return err
		}
	}
	w.timelineRead = true
	return nil
}

// final is watch's outcome once the transaction is in a terminal state.
func (w *watcher) final() error {
	switch w.state {
	case components.StateReverted, components.StateFailed:
		return &finalStateError{txID: w.tx.String(), state: string(w.state), reason: w.reason}
	}
	return nil
}

// follow reads c and its successors until the watch is over: a final
// state with --until-final, the context's end, or an error that
// reconnecting cannot mend.
func (w *watcher) follow(c *sseConn) error {
	delay := time.Duration(0)
	for {
		done, delivered, err := w.read(c)
		c.close()
		if done {
			return w.final()
		}
		if ctxErr := w.x.ctx.Err(); ctxErr != nil {
			return w.ended(ctxErr)
		}
		var h *handleError
		if errors.As(err, &h) {
			return h.err
		}
		if delivered {
			delay = 0
		}
		for {
			delay = nextDelay(delay, w.retry)
			if w.lastID == "" && w.printed < 0 {
				w.x.note("the event stream dropped (%v) before its first event; reconnecting in %s: events in between may be missed (use --after SEQ to start from a known event)", err, delay.Round(time.Millisecond))
			} else {
				w.x.note("the event stream dropped (%v); reconnecting in %s%s", err, delay.Round(time.Millisecond), w.position())
			}
			if err := sleep(w.x.ctx, delay); err != nil {
				return w.ended(err)
			}
			c, err = w.connect()
			if err == nil {
				break
			}
			var a *apiError
			if errors.As(err, &a) && !retryable(a.status) {
				return err
			}
			if ra := a.retryAfter(); ra > delay {
				delay = ra
			}
		}
	}
}

// ended explains a watch stopped by its context. Interrupting a watch
// that has no end of its own is how it is meant to stop.
func (w *watcher) ended(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && w.untilFinal:
		return fmt.Errorf("watch: no final state within %s (--timeout); the transaction is %s", w.x.timeout, w.state)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("watch: stopped after %s (--timeout)", w.x.timeout)
	case w.untilFinal:
		return fmt.Errorf("watch: interrupted before a final state; the transaction is %s", w.state)
	}
	return nil
}

func (w *watcher) position() string {
	switch {
	case w.lastID != "":
		return " after event " + w.lastID
	case w.printed >= 0:
		return " after event " + strconv.FormatInt(w.printed, 10)
	}
	return ""
}

// nextDelay doubles the delay between attempts up to reconnectMax, never
// below what the server asked for, with jitter so that many clients cut
// off at once do not come back at once.
func nextDelay(prev, serverRetry time.Duration) time.Duration {
	d := max(reconnectMin, serverRetry)
	if prev > 0 {
		d = max(d, min(2*prev, reconnectMax))
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable reports whether a refused connection may succeed later.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// sseConn is one connection to the event stream.
type sseConn struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	// watchdog ends the connection when nothing arrives for idleTimeout
	// (connectTimeout before the answer), and sets silent.
	watchdog *time.Timer
	silent   atomic.Bool
}

func (c *sseConn) close() {
	c.watchdog.Stop()
	c.cancel()
	_ = c.body.Close()
}

// connect opens the stream where the watch stands: after the last event
// the stream completed, else after the last printed, else from now on.
func (w *watcher) connect() (*sseConn, error) {
	params := &gatewayapi.StreamEventsParams{}
	switch {
	case w.tx != nil && !w.timelineRead:
		// Opened before the timeline is read, the stream starts from
		// now on: the timeline has the past.
	case w.lastID != "":
		params.LastEventID = &w.lastID
	case w.printed >= 0:
		after := w.printed
		params.After = &after
	}
	if w.wireTypes != "" {
		params.Types = &w.wireTypes
	}
	req, err := gatewayapi.NewStreamEventsRequest(w.x.baseURL+"/", params)
	if err != nil {
		return nil, fmt.Errorf("build the event stream request: %w", err)
	}
	ctx, cancel := context.WithCancel(w.x.ctx)
	c := &sseConn{cancel: cancel}
	c.watchdog = time.AfterFunc(connectTimeout, func() {
		c.silent.Store(true)
		cancel()
	})
	watchdog := c.watchdog
	req = req.WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+w.x.key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", "txctl/"+version())
	resp, err := w.x.http.Do(req)
	if err != nil {
		watchdog.Stop()
		cancel()
		if c.silent.Load() {
			return nil, fmt.Errorf("open the event stream: no answer within %s", connectTimeout)
		}
		return nil, w.x.transportError("open the event stream", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		watchdog.Stop()
		cancel()
		err := newAPIError("open the event stream", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		if a, ok := err.(*apiError); ok {
			a.header = resp.Header
		}
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		_ = resp.Body.Close()
		watchdog.Stop()
		cancel()
		return nil, fmt.Errorf("open the event stream: the answer is %q, not text/event-stream", ct)
	}
	watchdog.Reset(idleTimeout)
	c.body = resp.Body
	return c, nil
}

// read reads events from c until the stream ends or the watch is done.
// delivered reports whether the connection brought any event, which makes
// the next reconnection prompt again.
func (w *watcher) read(c *sseConn) (done, delivered bool, err error) {
	sc := bufio.NewScanner(c.body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	// The fields of the message being read; an event counts only once
	// its blank line arrives, so an event cut off by a dropped
	// connection is neither printed nor skipped when resuming.
	var (
		id, typ string
		hasID   bool
		data    strings.Builder
		hasData bool
	)
	for sc.Scan() {
		c.watchdog.Reset(idleTimeout)
		line := sc.Text()
		if line == "" {
			if hasID {
				w.lastID = id
			}
			if hasData {
				delivered = true
				if done, err := w.dispatch(typ, data.String()); err != nil || done {
					if err != nil {
						err = &handleError{err}
					}
					return done, delivered, err
				}
			}
			id, typ, hasID, hasData = "", "", false, false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") { // a comment: the greeting and keep-alives
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.Contains(value, "\x00") {
				id, hasID = value, true
			}
		case "event":
			typ = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "retry":
			if ms, err := strconv.ParseUint(value, 10, 31); err == nil {
				w.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if c.silent.Load() {
		return false, delivered, fmt.Errorf("nothing came for %s", idleTimeout)
	}
	if err := sc.Err(); err != nil {
		return false, delivered, err
	}
	return false, delivered, io.ErrUnexpectedEOF
}

// handleError is a failure to handle an event (print it, decode it),
// which reconnecting would only repeat.
type handleError struct{ err error }

func (e *handleError) Error() string { return e.err.Error() }
func (e *handleError) Unwrap() error { return e.err }

// dispatch handles one complete message of the stream.
func (w *watcher) dispatch(typ, data string) (bool, error) {
	if typ == "error" {
		// The gateway says why it is about to close the stream.
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal([]byte(data), &p) == nil && p.Detail != "" {
			data = p.Detail
		}
		w.x.note("the event stream reports: %s", data)
		return false, nil
	}
	var e components.Event
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return false, fmt.Errorf("an event of the stream does not decode: %w", err)
	}
	return w.handle(e, json.RawMessage(data))
}

// handle prints an event unless it is another transaction's, filtered
// out or printed already, and follows the watched transaction's state.
func (w *watcher) handle(e components.Event, raw json.RawMessage) (bool, error) {
	if e.Seq <= w.printed {
		return false, nil
	}
	if w.tx != nil {
		if id, err := uuid.Parse(e.TxId); err != nil || id != *w.tx {
			return false, nil
		}
	}
	w.printed = e.Seq
	if w.tx != nil {
		w.follow1(e)
	}
	if w.printTypes == nil || w.printTypes[e.Type] {
		var err error
		if w.x.json {
			err = w.x.jsonLine(raw)
		} else {
			_, err = fmt.Fprintln(w.x.stdout, describeEvent(e))
		}
		if err != nil {
			return false, err
		}
	}
	return w.untilFinal && terminalStates[w.state], nil
}

// follow1 moves the watched transaction's state on by one event.
func (w *watcher) follow1(e components.Event) {
	switch e.Type {
	case components.EventTxStateChanged:
		var d components.TxStateChangedData
		if json.Unmarshal(e.Data, &d) == nil && d.ToState != "" {
			w.state, w.reason = d.ToState, deref(d.Reason)
		}
	case components.EventTxReorged:
		var d components.TxReorgedData
		if json.Unmarshal(e.Data, &d) == nil && d.ToState != "" {
			w.state, w.reason = d.ToState, ""
		}
	}
}

// describeEvent is one line of watch's text output.
func describeEvent(e components.Event) string {
	head := fmt.Sprintf("%-7d %s  %s  %-17s", e.Seq, formatTime(e.CreatedAt), e.TxId, e.Type)
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	switch e.Type {
	case components.EventTxStateChanged:
		var d components.TxStateChangedData
		if json.Unmarshal(e.Data, &d) != nil {
			break
		}
		if d.FromState != nil {
			add("%s -> %s", *d.FromState, d.ToState)
		} else {
			add("%s", d.ToState)
		}
		if d.SubState != nil {
			add("sub_state=%s", *d.SubState)
		}
		if d.Reason != nil {
			add("reason=%q", *d.Reason)
		}
		if d.RevertReason != nil {
			add("revert_reason=%q", *d.RevertReason)
		}
		if d.Rule != nil {
			add("rule=%s", *d.Rule)
		}
		if d.Approver != nil {
			add("approver=%s", *d.Approver)
		}
		if d.Approvers != nil {
			add("approvers=%s", strings.Join(*d.Approvers, ","))
		}
		if d.Nonce != nil {
			add("nonce=%d", *d.Nonce)
		}
		if d.Hash != nil {
			add("hash=%s", *d.Hash)
		}
		if d.Route != nil {
			add("route=%s", *d.Route)
		}
	case components.EventTxAttempt:
		var d components.TxAttemptData
		if json.Unmarshal(e.Data, &d) != nil {
			break
		}
		add("attempt %d %s nonce=%d hash=%s route=%s", d.Attempt, d.Kind, d.Nonce, d.Hash, d.Route)
		if d.Fees.MaxFeePerGas != nil {
			add("max_fee=%s", *d.Fees.MaxFeePerGas)
		}
		if d.Fees.GasPrice != nil {
			add("gas_price=%s", *d.Fees.GasPrice)
		}
		if d.Replaces != nil {
			add("replaces=%s", *d.Replaces)
		}
	case components.EventTxConfirmation:
		var d components.TxConfirmationData
		if json.Unmarshal(e.Data, &d) != nil {
			break
		}
		status := "succeeded"
		if d.ReceiptStatus == components.ReceiptReverted {
			status = "reverted"
		}
		add("block %d confirmations=%d receipt=%s hash=%s", d.BlockNumber, d.Confirmations, status, d.Hash)
		if d.NewFork {
			add("new_fork")
		}
	case components.EventTxReorged:
		var d components.TxReorgedData
		if json.Unmarshal(e.Data, &d) != nil {
			break
		}
		add("block %d left the chain: %s -> %s hash=%s", d.BlockNumber, d.FromState, d.ToState, d.Hash)
	}
	if len(parts) == 0 {
		return head + "  " + string(e.Data)
	}
	return head + "  " + strings.Join(parts, " ")
}

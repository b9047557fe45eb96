package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/txfence/txfence/shared/batch"
	"github.com/txfence/txfence/shared/errs"
)

// A create costs txmanager a statement and a commit, and the gateway an
// HTTPS round trip; at thousands a second the round trips are most of
// the work. So the gateway's concurrent creates share them: a create
// queues (shared/batch), and while fewer than maxBatchCalls batches are in
// flight one more is sent with everything queued (txmanager's createTxBatch, whose
// items are answered one by one, as createTx would answer them). A lone
// create goes at once, alone: batching adds no wait when there is nothing
// to share.
const (
	maxBatchItems = 256     // txmanager.yaml allows 256
	maxBatchBytes = 4 << 20 // and 8 MiB
	maxBatchCalls = 2
	// batchTimeout bounds a batch, which no single caller owns (each
	// caller still leaves at its own deadline). A full batch is megabytes
	// of call data that txmanager parses, validates and inserts: 10 s
	// cut 2 MiB batches short on a loaded two-core machine under the race
	// detector, so the bound is for a hung txmanager, not a busy one.
	batchTimeout = 30 * time.Second
	// maxBatchAnswer bounds the answer read: 256 transactions, each with
	// 128 KiB of call data as hex and 16 KiB of metadata, fit.
	maxBatchAnswer = 96 << 20
)

// pendingCreate is one create waiting to be sent.
type pendingCreate struct {
	ctx  context.Context // the caller's: the batch it opens carries its request id and trace
	body []byte
	done chan createAnswer // buffered: a batch never blocks on a caller who left
}

type createAnswer struct {
	tx      Tx
	created bool
	err     error
}

// newCreateQueue is the client's queue of creates.
func (m *TxManager) newCreateQueue() *batch.Queue[*pendingCreate] {
	return batch.New(maxBatchCalls, takeCreates, m.sendCreates)
}

// takeCreates says how many of the waiting creates the next batch holds:
// up to maxBatchItems, and maxBatchBytes of bodies, but at least one.
func takeCreates(waiting []*pendingCreate) int {
	n, size := 0, 0
	for n < len(waiting) && n < maxBatchItems && (n == 0 || size+len(waiting[n].body) <= maxBatchBytes) {
		size += len(waiting[n].body)
		n++
	}
	return n
}

// Create stores an intent, the JSON of txmanager's CreateTxRequest,
// idempotently on (chain_id, from, request_id). created is false when the
// same intent had been accepted before and the answer is the stored one.
// A caller who leaves before the answer may still find its transaction
// created, as with any call cut off; the request id makes the retry safe.
func (m *TxManager) Create(ctx context.Context, body []byte) (tx Tx, created bool, err error) {
	if !json.Valid(body) {
		// It would spoil the batch it joined for every other create.
		return Tx{}, false, errs.E(errs.Invalid, "create: the body is not JSON")
	}
	p := &pendingCreate{ctx: ctx, body: body, done: make(chan createAnswer, 1)}
	m.creates.Add(p)
	select {
	case a := <-p.done:
		return a.tx, a.created, a.err
	case <-ctx.Done():
		return Tx{}, false, unreachable("create", ctx.Err())
	}
}

// sendCreates sends a batch and answers each of its creates.
func (m *TxManager) sendCreates(creates []*pendingCreate) {
	answers, err := m.sendBatch(creates)
	for i, p := range creates {
		if err != nil {
			p.done <- createAnswer{err: err}
			continue
		}
		p.done <- answers[i]
	}
}

// sendBatch sends one batch and returns each create's answer.
func (m *TxManager) sendBatch(creates []*pendingCreate) ([]createAnswer, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(creates[0].ctx), batchTimeout)
	defer cancel()
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i, p := range creates {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(p.body)
	}
	body.WriteString(`]}`)
	resp, err := m.api.CreateTxBatchWithBody(ctx, "application/json", &body)
	if err != nil {
		return nil, unreachable("create", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBatchAnswer))
	if err != nil {
		return nil, unreachable("create", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("create: %w", errs.FromUpstream(resp.StatusCode, resp.Header.Get("Content-Type"), raw))
	}
	var answer struct {
		Items []struct {
			Status  int             `json:"status"`
			Tx      json.RawMessage `json:"tx"`
			Problem *errs.Problem   `json:"problem"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("create: txmanager's answer: %w", err)
	}
	if len(answer.Items) != len(creates) {
		return nil, fmt.Errorf("create: txmanager answered %d items for a batch of %d", len(answer.Items), len(creates))
	}
	out := make([]createAnswer, len(creates))
	for i, item := range answer.Items {
		switch {
		case (item.Status == http.StatusCreated || item.Status == http.StatusOK) && item.Tx != nil:
			t := Tx{JSON: item.Tx}
			if err := json.Unmarshal(item.Tx, &t); err != nil {
				out[i].err = fmt.Errorf("create: txmanager's answer: %w", err)
				continue
			}
			out[i] = createAnswer{tx: t, created: item.Status == http.StatusCreated}
		case item.Problem != nil:
			out[i].err = fmt.Errorf("create: %w", errs.FromProblem(item.Status, *item.Problem))
		default:
			out[i].err = fmt.Errorf("create: txmanager answered an item with status %d and neither a transaction nor a problem", item.Status)
		}
	}
	return out, nil
}

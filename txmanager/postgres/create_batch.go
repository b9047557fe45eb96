package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/batch"
	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/txmanager"
)

// The statement of queries/create_batch.sql.
var qInsertIntents = query("InsertIntents")

// Creates arrive one per HTTP request, and each alone would cost
// PostgreSQL a statement and a commit: at thousands a second the commits,
// not the rows, are the work. So concurrent creates share them: they
// queue (shared/batch), and a flush inserts what is queued (up to
// maxCreateBatch rows) in one statement and one commit. A lone create is
// flushed at once. One flush at a time makes the batches as large as the
// load: measured, two flushers gave smaller batches and fewer creates a
// second.
//
// The flush does only the shared statement. What a create needs beyond it
// (reading the transaction that holds a repeated request id, or inserting
// alone after a batch failed) its caller does, so that one slow create
// cannot hold up the queue.
const (
	maxCreateFlushes = 1
	maxCreateBatch   = 512
	// createFlushTimeout bounds one flush, which no single caller owns.
	createFlushTimeout = 10 * time.Second
)

// newCreateQueue is the store's queue of creates.
func (s *Store) newCreateQueue() *batch.Queue[*pendingCreate] {
	return batch.New(maxCreateFlushes, batch.UpTo[*pendingCreate](maxCreateBatch), s.flushCreates)
}

// pendingCreate is one create waiting in the queue.
type pendingCreate struct {
	in   *txmanager.Intent
	hash [32]byte
	id   uuid.UUID
	done chan createResult // buffered: the flush never blocks on a caller who left
}

// createResult is a flush's answer to one create.
type createResult struct {
	tx      txmanager.Tx
	created bool
	err     error
	// taken says the request id already had a transaction, made before
	// or earlier in the same batch: the caller reads it.
	taken bool
	// alone says the shared statement failed and stored nothing: the
	// caller inserts its create by itself.
	alone bool
}

// await waits for p's flush, or ctx's end, and finishes what the flush
// left to p's caller. A caller who leaves early may still find its
// transaction created: the same is true of any commit racing a cancel, and
// the request id makes the retry safe.
func (s *Store) await(ctx context.Context, p *pendingCreate) (txmanager.Tx, bool, error) {
	var r createResult
	select {
	case r = <-p.done:
	case <-ctx.Done():
		return txmanager.Tx{}, false, ctx.Err()
	}
	switch {
	case r.taken:
		t, err := s.existing(ctx, p.in, p.hash)
		return t, false, err
	case r.alone:
		return s.createOne(ctx, p)
	}
	return r.tx, r.created, r.err
}

// flushCreates inserts a batch, or a lone create by itself. When the
// shared statement fails (an unknown parent, a broken rule), nothing of it
// was stored, and each create is sent back to be inserted alone, so that
// only the bad one fails, with its own error.
func (s *Store) flushCreates(creates []*pendingCreate) {
	ctx, cancel := context.WithTimeout(context.Background(), createFlushTimeout)
	defer cancel()
	if len(creates) == 1 {
		p := creates[0]
		t, created, err := s.createOne(ctx, p)
		p.done <- createResult{tx: t, created: created, err: err}
		return
	}
	created, err := s.insertBatch(ctx, creates)
	for _, p := range creates {
		t, ok := created[p.id]
		switch {
		case err != nil:
			p.done <- createResult{alone: true}
		case ok:
			p.done <- createResult{tx: t, created: true}
		default:
			p.done <- createResult{taken: true}
		}
	}
}

// insertBatch inserts every one of creates that holds a free request id,
// with its INIT event under the feed's barrier, in one statement
// (InsertIntents), and returns the transactions it created by id.
// (Concurrent creates have no order of their own to keep: the statement
// inserts them in the order of their unique key.)
func (s *Store) insertBatch(ctx context.Context, creates []*pendingCreate) (map[uuid.UUID]txmanager.Tx, error) {
	n := len(creates)
	var (
		ids, requestIDs, values, routes, metadatas = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		payloads                                   = make([]string, n)
		chains                                     = make([]int64, n)
		signers, hashes, tos, datas                = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		gases                                      = make([]*int64, n)
		maxFees, maxTips, dependsOn                = make([]*string, n), make([]*string, n), make([]*string, n)
	)
	for i, p := range creates {
		in := p.in
		ids[i], chains[i], signers[i], requestIDs[i], hashes[i] = p.id.String(), int64(in.ChainID), in.From.Bytes(), in.RequestID, p.hash[:]
		tos[i], values[i], datas[i], gases[i] = addrBytes(in.To), numeric(in.Value), nonNil(in.Data), optInt(in.Gas)
		maxFees[i], maxTips[i], routes[i], metadatas[i] = optNumeric(in.MaxFeePerGas), optNumeric(in.MaxPriorityFeePerGas), string(in.Route), string(metadata(in.Metadata))
		dependsOn[i] = arrayLiteral(in.DependsOn)
		// The INIT event carries what links a transaction to others (its
		// dependency, a transfer's transit id): the ledger books a
		// transfer between chains by them.
		payload, err := json.Marshal(txmanager.InitEvent(in))
		if err != nil {
			return nil, err
		}
		payloads[i] = string(payload)
	}
	rows, err := s.pool.Query(ctx, qInsertIntents.SQL,
		ids, chains, signers, requestIDs, hashes, tos, values, datas, gases, maxFees, maxTips, routes, dependsOn, metadatas,
		txmanager.EventStateChanged, payloads, int64(eventBarrier))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	created := make(map[uuid.UUID]txmanager.Tx, n)
	for rows.Next() {
		t, err := scanTx(rows)
		if err != nil {
			return nil, err
		}
		created[t.ID] = t
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return created, nil
}

// arrayLiteral is ids as a PostgreSQL array literal ({id,id}), nil for
// none.
func arrayLiteral(ids dependson.List) *string {
	if ids == nil {
		return nil
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	s := "{" + strings.Join(parts, ",") + "}"
	return &s
}

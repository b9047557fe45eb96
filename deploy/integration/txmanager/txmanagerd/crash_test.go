package txmanagerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagerd"
	"github.com/txfence/txfence/txmanager/worker"
)

// TestCrashAfterEachWriteAheadStepResumesWithTheSameNonceAndHash kills a
// txmanagerd process with SIGKILL (its own fault injection,
// TEST_CRASH_AFTER) at each write-ahead point of the pipeline while it
// works a batch of transactions, then starts a node again without the
// fault, under the crashed node's id or another one. SYSTEM.md invariants
// 1, 2, 3 and 6: every transaction keeps the nonce it had at the crash
// and is signed once (signerd gives one signature per nonce; a re-sign
// after the crash is answered by replaying it), the hash txmanager stores
// is the one mined, nothing is lost, nothing else reaches the chain, and
// the new owner works under a higher fencing token.
func TestCrashAfterEachWriteAheadStepResumesWithTheSameNonceAndHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		step worker.Step
		// restartAs is the id of the node started after the crash: the
		// crashed node's own (it releases what its previous run left and
		// acquires again) or another node, which takes the orphaned
		// signer over once the dead node's lease lapses.
		restartAs string
		// mine mines a block between the crash and the restart: the chain
		// moves on while nobody works the signer, as it does in
		// production while an owner is down for a lease period.
		mine bool
	}{
		{name: "allocated", step: worker.StepAllocated, restartAs: "node-0"},
		{name: "signature", step: worker.StepSignature, restartAs: "node-0"},
		// signerd holds a signature the database does not; a new block
		// moves the fee market before the restart, and the request signed
		// again must still be the one signed before the crash (replayed):
		// a repriced one is a different transaction at a signed nonce.
		{name: "signature/chain moved", step: worker.StepSignature, restartAs: "node-0", mine: true},
		{name: "signed", step: worker.StepSigned, restartAs: "node-1"},
		{name: "broadcast", step: worker.StepBroadcast, restartAs: "node-0"},
		// Mined before the restart: the resend is answered "nonce too
		// low", which must count as broadcast since our attempt is mined.
		{name: "broadcast/mined before restart", step: worker.StepBroadcast, restartAs: "node-1", mine: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const total = 3
			c := newCluster(t, map[string]string{
				txmanagerd.Spec.EnvPrefix + "LEASE_TTL":             "2s",
				txmanagerd.Spec.EnvPrefix + "LEASE_RENEW":           "400ms",
				txmanagerd.Spec.EnvPrefix + "DB_IDLE_IN_TX_TIMEOUT": "1s",
			})
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, c.db)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			r := &crashRig{c: c, conn: conn, audit: servicetest.Client(t, c.pki, "txmanager", "signer")}

			// A node that works no signer accepts the transactions, so
			// the crashing node finds them all at its first round and
			// takes them through the pipeline as one batch: the crash
			// then catches every one of them at the same step.
			acceptor := servicetest.StartProcess(t, c.bin, nil, servicetest.Merge(c.env("acceptor"), map[string]string{
				txmanagerd.Spec.EnvPrefix + "SIGNER_URL":    "",
				txmanagerd.Spec.EnvPrefix + "MEVROUTER_URL": "",
			}), "internal")
			client := servicetest.Client(t, c.pki, "gateway", "txmanager")
			var ids []string
			for i := range total {
				body := fmt.Sprintf(`{"chain_id": %d, "from": %q, "request_id": "crash-%d", "to": "0x0000000000000000000000000000000000000b0b",
					"value": "1", "route": "public"}`, c.stack.Node.ChainID(), c.from.Hex(), i)
				resp, err := client.Post(acceptor.URL("internal")+"/internal/v1/tx", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				var created struct {
					TxID string `json:"tx_id"`
				}
				err = json.NewDecoder(resp.Body).Decode(&created)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("create %d: %d (%v)", i, resp.StatusCode, err)
				}
				ids = append(ids, created.TxID)
			}

			crashing := startCrashingNode(t, c, "node-0", tc.step)
			crashing.WaitKilled(t, time.Minute)

			// What the crash left durable.
			atCrash := r.txs(t)
			owner, crashToken := r.lease(t)
			if owner != "node-0" || crashToken < 1 {
				t.Fatalf("lease at the crash: %q/%d, want node-0's", owner, crashToken)
			}
			audit := r.auditLog(t)
			pool, err := c.stack.Node.TxPoolContent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var nonces []int64
			for _, id := range ids {
				tx, ok := atCrash[id]
				switch {
				case !ok:
					t.Fatalf("%s is not in the database", id)
				case tx.nonce == nil:
					t.Fatalf("%s has no nonce at the crash after %s (state %s)", id, tc.step, tx.state)
				}
				nonces = append(nonces, *tx.nonce)
				want, wantAttempts := "ALLOCATED", 0
				if tc.step == worker.StepSigned || tc.step == worker.StepBroadcast {
					want, wantAttempts = "SIGNED", 1
				}
				if tx.state != want || tx.attempts != wantAttempts {
					t.Errorf("%s at the crash after %s: %s with %d attempts, want %s with %d", id, tc.step, tx.state, tx.attempts, want, wantAttempts)
				}
			}
			slices.Sort(nonces)
			for i, n := range nonces {
				if n != int64(i) {
					t.Errorf("nonces at the crash %v, want 0 to %d, each once", nonces, total-1)
					break
				}
			}
			// signerd's audit log says what was signed before the crash:
			// nothing before the signing step, one signature per
			// transaction from it on, the one stored from SIGNED on.
			signedAtCrash := map[string]common.Hash{}
			for _, e := range audit {
				if e.Outcome != "signed" || e.TxHash == nil {
					t.Errorf("audit record at the crash: %+v, want only fresh signatures", e)
					continue
				}
				if tx := atCrash[e.TxID]; tx.nonce == nil || uint64(*tx.nonce) != e.Nonce {
					t.Errorf("signerd signed %s at nonce %d, txmanager allocated %v", e.TxID, e.Nonce, tx.nonce)
				}
				if _, twice := signedAtCrash[e.TxID]; twice {
					t.Errorf("signerd signed %s twice before the crash", e.TxID)
				}
				signedAtCrash[e.TxID] = *e.TxHash
			}
			if tc.step == worker.StepAllocated {
				if len(signedAtCrash) != 0 {
					t.Errorf("%d signatures before a crash right after allocation", len(signedAtCrash))
				}
			} else {
				if len(signedAtCrash) != total {
					t.Errorf("%d transactions signed by signerd at a crash after %s, want %d", len(signedAtCrash), tc.step, total)
				}
				for _, id := range ids {
					if tx := atCrash[id]; tx.attempts == 1 && tx.hash != signedAtCrash[id] {
						t.Errorf("%s stored %s, signerd signed %s", id, tx.hash, signedAtCrash[id])
					}
				}
			}
			// The chain: nothing sent before the broadcast step, the
			// stored transactions (and nothing else) after it.
			inPool := pool.All()
			if tc.step == worker.StepBroadcast {
				for _, id := range ids {
					if !pool.Contains(atCrash[id].hash) {
						t.Errorf("%s (%s) is not in anvil's pool after a crash right after its broadcast", id, atCrash[id].hash)
					}
				}
				if len(inPool) != total {
					t.Errorf("anvil's pool holds %d transactions, want our %d", len(inPool), total)
				}
			} else if len(inPool) != 0 {
				t.Errorf("anvil's pool holds %d transactions after a crash before any broadcast", len(inPool))
			}
			if t.Failed() {
				t.FailNow()
			}

			if tc.mine {
				if err := c.stack.Node.Mine(ctx, 1); err != nil {
					t.Fatal(err)
				}
			}

			restarted := c.node(t, tc.restartAs)
			r.waitBroadcast(t, ids, restarted)
			if err := c.stack.Node.Mine(ctx, 1); err != nil {
				t.Fatal(err)
			}

			after := r.txs(t)
			stored := map[common.Hash]string{}
			for _, id := range ids {
				was, now := atCrash[id], after[id]
				if now.nonce == nil || *now.nonce != *was.nonce {
					t.Errorf("%s: nonce %v after the restart, %d at the crash", id, now.nonce, *was.nonce)
					continue
				}
				if now.attempts != 1 {
					t.Errorf("%s has %d attempts, want 1", id, now.attempts)
				}
				// The hash txmanager stores is the one signerd gave before
				// the crash, whatever the step.
				if h, ok := signedAtCrash[id]; ok && now.hash != h {
					t.Errorf("%s: hash %s after the restart, signerd signed %s before the crash", id, now.hash, h)
				}
				stored[now.hash] = id
				r.requireMined(t, id, now)
			}
			if mined, err := c.stack.Node.Client().NonceAt(ctx, c.from, nil); err != nil || mined != total {
				t.Errorf("anvil's mined nonce of the signer %d (%v), want %d", mined, err, total)
			}
			r.requireOnlyOursOnChain(t, stored, total)

			// One event per state change: each transaction was allocated,
			// signed and broadcast once, the events naming the nonce and
			// the hash it kept.
			events := r.events(t)
			for _, id := range ids {
				now := after[id]
				for _, state := range []string{"ALLOCATED", "SIGNED", "BROADCASTED"} {
					got := events[id][state]
					if len(got) != 1 {
						t.Errorf("%s: %d events to %s, want 1", id, len(got), state)
						continue
					}
					if got[0].Nonce == nil || *got[0].Nonce != *now.nonce {
						t.Errorf("%s: the %s event names nonce %v, want %d", id, state, got[0].Nonce, *now.nonce)
					}
					if state != "ALLOCATED" && (got[0].Hash == nil || *got[0].Hash != now.hash) {
						t.Errorf("%s: the %s event names hash %v, want %s", id, state, got[0].Hash, now.hash)
					}
				}
			}
			var next int64
			if err := conn.QueryRow(ctx, `SELECT next_nonce FROM nonce_cursor`).Scan(&next); err != nil || next != total {
				t.Errorf("nonce cursor %d (%v), want %d: a nonce was allocated past the batch", next, err, total)
			}

			// signerd signed each nonce exactly once, the transaction
			// stored at it; a signing request repeated after the crash
			// (step signature) was answered with that same signature, and
			// transactions stored SIGNED were never sent to signerd again.
			var fresh, replayed int
			for _, e := range r.auditLog(t) {
				id := e.TxID
				switch {
				case e.TxHash == nil || (e.Outcome != "signed" && e.Outcome != "replayed"):
					t.Errorf("audit record %+v: signerd refused or denied a request", e)
				case after[id].nonce == nil || uint64(*after[id].nonce) != e.Nonce || *e.TxHash != after[id].hash:
					t.Errorf("audit record %+v: not the stored transaction (nonce %v, hash %s)", e, after[id].nonce, after[id].hash)
				case e.Outcome == "signed":
					fresh++
				default:
					replayed++
				}
			}
			wantReplayed := 0
			if tc.step == worker.StepSignature {
				wantReplayed = total
			}
			if fresh != total || replayed != wantReplayed {
				t.Errorf("signerd signed %d and replayed %d, want %d and %d", fresh, replayed, total, wantReplayed)
			}

			// The restarted node works the signer under a newer lease
			// than the crashed one's.
			if owner, token := r.lease(t); owner != tc.restartAs || token <= crashToken {
				t.Errorf("lease after the restart %q/%d, want %s's above %d", owner, token, tc.restartAs, crashToken)
			}
		})
	}
}

// crashRig reads what a crash test checks: the database, signerd's audit
// log and the chain.
type crashRig struct {
	c     *cluster
	conn  *pgx.Conn
	audit *http.Client
}

// crashTx is a transaction's row with its attempts.
type crashTx struct {
	state, subState, reason string
	nonce                   *int64
	attempts                int
	hash                    common.Hash // attempt 1's; zero without one
}

func (r *crashRig) txs(t *testing.T) map[string]crashTx {
	t.Helper()
	rows, err := r.conn.Query(context.Background(), `
		SELECT t.tx_id::text, t.state, coalesce(t.sub_state, ''), coalesce(t.reason, ''), t.nonce,
			(SELECT count(*) FROM attempt a WHERE a.tx_id = t.tx_id),
			(SELECT a.hash FROM attempt a WHERE a.tx_id = t.tx_id AND a.attempt = 1)
		FROM tx t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]crashTx{}
	for rows.Next() {
		var (
			id   string
			tx   crashTx
			hash []byte
		)
		if err := rows.Scan(&id, &tx.state, &tx.subState, &tx.reason, &tx.nonce, &tx.attempts, &hash); err != nil {
			t.Fatal(err)
		}
		tx.hash = common.BytesToHash(hash)
		out[id] = tx
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lease is the signer's lease row: its owner (expired or not) and token.
func (r *crashRig) lease(t *testing.T) (owner string, token int64) {
	t.Helper()
	err := r.conn.QueryRow(context.Background(), `SELECT coalesce(owner_node, ''), fencing_token FROM signer_lease`).Scan(&owner, &token)
	if err != nil {
		t.Fatal(err)
	}
	return owner, token
}

// crashAudit is the part of a signerd audit entry the crash tests read.
type crashAudit struct {
	TxID    string       `json:"tx_id"`
	Nonce   uint64       `json:"nonce"`
	Outcome string       `json:"outcome"`
	Reuse   string       `json:"reuse"`
	RuleID  string       `json:"rule_id"`
	Reasons []string     `json:"reasons"`
	TxHash  *common.Hash `json:"tx_hash"`
}

// auditLog is everything signerd decided, read through its audit API as
// txmanager's identity.
func (r *crashRig) auditLog(t *testing.T) []crashAudit {
	t.Helper()
	resp, err := r.audit.Get(r.c.env("audit")[txmanagerd.Spec.EnvPrefix+"SIGNER_URL"] + "/v1/audit?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Records []struct {
			Entry crashAudit `json:"entry"`
		} `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("signerd's audit log: %d (%v)", resp.StatusCode, err)
	}
	out := make([]crashAudit, len(page.Records))
	for i, rec := range page.Records {
		out[i] = rec.Entry
	}
	return out
}

// auditText is the audit log for a failure message, one record a line.
func (r *crashRig) auditText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, e := range r.auditLog(t) {
		hash := "-"
		if e.TxHash != nil {
			hash = e.TxHash.Hex()
		}
		fmt.Fprintf(&b, "%s nonce %d: %s %s %s %s %q\n", e.TxID, e.Nonce, e.Outcome, e.Reuse, hash, e.RuleID, e.Reasons)
	}
	return b.String()
}

// crashEvent is the part of a tx.state_changed payload the tests read.
type crashEvent struct {
	Nonce *int64       `json:"nonce"`
	Hash  *common.Hash `json:"hash"`
}

// events are the state changes written, by transaction and state reached.
func (r *crashRig) events(t *testing.T) map[string]map[string][]crashEvent {
	t.Helper()
	rows, err := r.conn.Query(context.Background(), `SELECT tx_id::text, payload->>'to_state', payload FROM event
		WHERE type = 'tx.state_changed' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string][]crashEvent{}
	for rows.Next() {
		var (
			id, to  string
			payload []byte
			e       crashEvent
		)
		if err := rows.Scan(&id, &to, &payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &e); err != nil {
			t.Fatalf("event payload %s: %v", payload, err)
		}
		if out[id] == nil {
			out[id] = map[string][]crashEvent{}
		}
		out[id][to] = append(out[id][to], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitBroadcast waits until every transaction of ids is BROADCASTED. One
// left stuck or failed ends the test at once: the crash did not resume.
func (r *crashRig) waitBroadcast(t *testing.T, ids []string, node *servicetest.Process) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		txs := r.txs(t)
		var pending []string
		for _, id := range ids {
			tx := txs[id]
			switch {
			case tx.state == "BROADCASTED":
				continue
			case tx.subState == "stuck" || tx.state == "FAILED":
				t.Fatalf("%s is %s/%s after the restart (%s): the crash did not resume\nsignerd's audit log:\n%s\nrestarted node:\n%s",
					id, tx.state, tx.subState, tx.reason, r.auditText(t), node.Logs())
			}
			pending = append(pending, fmt.Sprintf("%s %s/%s %s", id, tx.state, tx.subState, tx.reason))
		}
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not broadcast within a minute of the restart: %v\nsignerd's audit log:\n%s\nrestarted node:\n%s", pending, r.auditText(t), node.Logs())
		}
		<-tick.C
	}
}

// requireMined checks that tx's stored hash is mined with status 1 as the
// signer's transaction at tx's nonce.
func (r *crashRig) requireMined(t *testing.T, id string, tx crashTx) {
	t.Helper()
	ctx := context.Background()
	eth := r.c.stack.Node.Client()
	receipt, err := eth.TransactionReceipt(ctx, tx.hash)
	if err != nil {
		t.Errorf("%s: no receipt for the stored hash %s: %v", id, tx.hash, err)
		return
	}
	if receipt.Status != types.ReceiptStatusSuccessful {
		t.Errorf("%s: receipt status %d", id, receipt.Status)
	}
	mined, _, err := eth.TransactionByHash(ctx, tx.hash)
	if err != nil {
		t.Fatal(err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(new(big.Int).SetUint64(r.c.stack.Node.ChainID())), mined)
	if err != nil || from != r.c.from || int64(mined.Nonce()) != *tx.nonce {
		t.Errorf("%s: mined from %s (%v) at nonce %d, want %s at %d", id, from, err, mined.Nonce(), r.c.from, *tx.nonce)
	}
}

// requireOnlyOursOnChain checks that the chain holds exactly the stored
// attempts (each block's transactions, and an empty pool): no second
// signature of a nonce was ever broadcast.
func (r *crashRig) requireOnlyOursOnChain(t *testing.T, stored map[common.Hash]string, total int) {
	t.Helper()
	ctx := context.Background()
	head, err := r.c.stack.Node.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mined int
	for n := uint64(1); n <= head; n++ {
		block, err := r.c.stack.Node.Client().BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range block.Transactions() {
			if _, ok := stored[tx.Hash()]; !ok {
				t.Errorf("block %d holds %s, not a stored attempt", n, tx.Hash())
			}
			mined++
		}
	}
	if mined != total {
		t.Errorf("%d transactions mined, want %d", mined, total)
	}
	pool, err := r.c.stack.Node.TxPoolContent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range pool.All() {
		t.Errorf("anvil's pool still holds %s (nonce %d) after mining", tx.Hash, tx.Nonce)
	}
}

// startCrashingNode starts a txmanagerd process that is to kill itself at
// step, a fault injection point.
func startCrashingNode(t *testing.T, c *cluster, name string, step worker.Step) *servicetest.Killed {
	t.Helper()
	return servicetest.StartKilled(t, c.bin, servicetest.Merge(c.env(name), map[string]string{txmanagerd.Spec.EnvPrefix + "TEST_CRASH_AFTER": string(step)}))
}

package signerd

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/logtest"
)

// TestCheckpointerCatchesALogRewoundUnderIt: the tables' owner cuts the
// log back under a running signerd, which signs other intents at the
// freed nonces until the head is where it was. The next checkpoint finds
// the record it anchored last rewritten: an alert, and signerd unready.
// A restarted signerd takes the file's last checkpoint as its own, and
// catches a second cut the same way.
func TestCheckpointerCatchesALogRewoundUnderIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := signertest.MigratedDatabase(t)
	store := postgres.New(db.ServePool(t))
	pol, err := policy.Load(signertest.DevelopmentPolicy())
	if err != nil {
		t.Fatal(err)
	}
	svc := &signer.Service{Keys: signertest.NewMemoryKeys(t, signertest.DevKeys...), Policy: pol, Store: store}
	signAt := func(txPrefix string, nonces ...uint64) {
		t.Helper()
		var reqs []*signer.Request
		for _, n := range nonces {
			to := signertest.DevAddress(1)
			reqs = append(reqs, &signer.Request{TxID: fmt.Sprintf("%s-%d", txPrefix, n), ChainID: 31337, From: signertest.DevAddress(0),
				Nonce: n, Type: signer.DynamicFee, To: &to, Value: big.NewInt(1), Gas: 21000,
				MaxFeePerGas: big.NewInt(30_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_000_000_000)})
		}
		res, err := svc.Sign(ctx, "txmanager", reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != signer.OutcomeSigned {
				t.Fatalf("%s: %s", r.Request.TxID, r.Outcome)
			}
		}
	}
	cutTo := func(seq int) {
		t.Helper()
		owner := db.OwnerPool(t)
		for _, stmt := range []string{
			`ALTER TABLE audit_log DISABLE TRIGGER USER`, `ALTER TABLE signature DISABLE TRIGGER USER`, `ALTER TABLE audit_head DISABLE TRIGGER USER`,
			fmt.Sprintf(`DELETE FROM signature WHERE audit_seq > %d`, seq), fmt.Sprintf(`DELETE FROM audit_log WHERE seq > %d`, seq),
			fmt.Sprintf(`UPDATE audit_head SET (seq, hash) = (SELECT seq, hash FROM audit_log WHERE seq = %d)`, seq),
			`ALTER TABLE audit_log ENABLE TRIGGER USER`, `ALTER TABLE signature ENABLE TRIGGER USER`, `ALTER TABLE audit_head ENABLE TRIGGER USER`,
		} {
			if _, err := owner.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	key, _, err := signer.GenerateCheckpointKey()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "checkpoints.jsonl")
	start := func() (*checkpointer, *logtest.Buffer) {
		t.Helper()
		var logs logtest.Buffer
		c, err := newCheckpointer(CheckpointConfig{File: file, Interval: time.Hour, Records: 1000}, key, store, slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.file.Close() })
		return c, &logs
	}

	running, logs := start()
	exported := textmetrics.NewRegistry()
	running.export(exported)
	signAt("tx", 0, 1, 2, 3)
	running.checkpoint(ctx)
	if err := running.ready(ctx); err != nil {
		t.Fatalf("ready after anchoring an intact log: %v", err)
	}
	for _, want := range []string{"txfence_signer_audit_checkpoint_seq 4\n", "txfence_signer_audit_rewritten 0\n", "txfence_signer_audit_checkpoint_failures_total 0\n"} {
		if got := scrape(exported); !strings.Contains(got, want) {
			t.Errorf("metrics lack %q:\n%s", want, got)
		}
	}
	cutTo(2)
	signAt("tx-again", 2, 3)
	running.checkpoint(ctx)
	if err := running.ready(ctx); err == nil || !strings.Contains(err.Error(), "record 4 hashes to") {
		t.Errorf("ready after the log was rewritten under signerd: %v; want it to name record 4", err)
	}
	if !strings.Contains(logs.String(), `"alert":"audit_rewritten"`) {
		t.Errorf("no audit_rewritten alert in the log:\n%s", logs)
	}
	if got := scrape(exported); !strings.Contains(got, "txfence_signer_audit_rewritten 1\n") {
		t.Errorf("metrics do not say the log was rewritten:\n%s", got)
	}

	// signerd restarts, and the owner cuts again before it looks.
	cutTo(3)
	restarted, logs := start()
	restarted.checkpoint(ctx)
	if err := restarted.ready(ctx); err == nil || !strings.Contains(err.Error(), "below the checkpoint at 4") {
		t.Errorf("ready of a restarted signerd over a cut log: %v; want the head named below the file's last checkpoint", err)
	}
	if !strings.Contains(logs.String(), `"alert":"audit_rewritten"`) {
		t.Errorf("no audit_rewritten alert in the restarted signerd's log:\n%s", logs)
	}
}

func scrape(reg *textmetrics.Registry) string {
	rec := httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
)

// checkpointKey is a fixed checkpoint key for tests.
func checkpointKey(t *testing.T) *signer.CheckpointKey {
	t.Helper()
	seed := sha256.Sum256([]byte("test checkpoint key"))
	k, err := signer.NewCheckpointKey(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// checkpointAt signs the store's current head as signerd's checkpointer
// does, as line line of a checkpoint file.
func checkpointAt(t *testing.T, store *postgres.Store, key *signer.CheckpointKey, line int) signer.Checkpoint {
	t.Helper()
	head, err := store.AuditHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cp := key.Sign(head, time.Now())
	cp.Line = line
	return cp
}

// TestCheckpointsCatchTheOwnerCuttingTheLogBack is the attack the
// checkpoints exist for: the tables' owner switches the triggers off,
// deletes the last records with their signature rows and rewinds the head
// to match. The database alone cannot tell; a checkpoint taken before
// names the records that are gone. When signerd then signs other intents
// at the freed nonces, the log grows back to the checkpoint's seq, and
// the checkpoint shows the record there is not the one it anchored.
func TestCheckpointsCatchTheOwnerCuttingTheLogBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := signertest.MigratedDatabase(t)
	store := postgres.New(db.ServePool(t))
	key := checkpointKey(t)
	signTransfers(t, store, 3)
	first := checkpointAt(t, store, key, 1)
	signTransfersFrom(t, store, 3, 3, "tx")
	second := checkpointAt(t, store, key, 2)
	if n, err := store.VerifyAudit(ctx, first, second); err != nil || n != 6 {
		t.Fatalf("the intact log against its checkpoints: %d records, %v", n, err)
	}

	asAttacker(t, db.OwnerPool(t), `
		DELETE FROM signature WHERE audit_seq > 4;
		DELETE FROM audit_log WHERE seq > 4;
		UPDATE audit_head SET (seq, hash) = (SELECT seq, hash FROM audit_log WHERE seq = 4)`)
	if _, err := store.VerifyAudit(ctx); err != nil {
		t.Fatalf("without checkpoints the cut log should verify (that is the attack): %v", err)
	}
	_, err := store.VerifyAudit(ctx, first, second)
	var bad *signer.CheckpointError
	if !errors.As(err, &bad) {
		t.Fatalf("verify against the checkpoints: %v; want a checkpoint error", err)
	}
	if bad.Checkpoint.Line != 2 || !strings.Contains(bad.Reason, "records 5 to 6") || !strings.Contains(bad.Reason, "ends at record 4") {
		t.Errorf("verify named %v; want the checkpoint on line 2 and records 5 to 6", bad)
	}

	// A second intent at each freed nonce is signed now, and the log
	// grows back past the checkpoint.
	signTransfersFrom(t, store, 4, 2, "tx-again")
	if _, err := store.VerifyAudit(ctx); err != nil {
		t.Fatalf("without checkpoints the rewritten log should verify: %v", err)
	}
	_, err = store.VerifyAudit(ctx, first, second)
	if !errors.As(err, &bad) {
		t.Fatalf("verify the rewritten log against the checkpoints: %v; want a checkpoint error", err)
	}
	if bad.Checkpoint.Line != 2 || !strings.Contains(bad.Reason, "rewritten at or before record 6") {
		t.Errorf("verify named %v; want the checkpoint on line 2, record 6 rewritten", bad)
	}
}

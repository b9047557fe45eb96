package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// TestAPausedOwnersTransactionDoesNotBlockTheTakeover: an owner frozen in
// the middle of a fenced transaction holds the lease row's lock; the
// server ends its idle session after the idle-in-transaction timeout, so
// the takeover goes through and the frozen transaction can never commit.
func TestAPausedOwnersTransactionDoesNotBlockTheTakeover(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	frozenPool, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 2, IdleInTransactionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(frozenPool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), frozenPool, nil); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(frozenPool)
	// The node taking over, on the same schema.
	other, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	taker := postgres.New(other)

	token, ok, err := s.Acquire(ctx(t), "frozen", aliceKey, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	f := txmanager.Fence{Node: "frozen", Key: aliceKey, Token: token}
	tx, err := frozenPool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	fence, args := postgres.FenceSQL(f, 0)
	var held bool
	if err := tx.QueryRow(ctx(t), `SELECT `+fence, args...).Scan(&held); err != nil || !held {
		t.Fatalf("fence check: %v %v", held, err)
	}
	// The owner freezes here, transaction open. Its lease runs out.
	if _, err := other.Exec(ctx(t), `UPDATE signer_lease SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	newToken, ok, err := taker.Acquire(ctx(t), "taker", aliceKey, time.Minute)
	if err != nil || !ok || newToken <= token {
		t.Fatalf("takeover: token %d ok=%v %v", newToken, ok, err)
	}
	t.Logf("takeover waited %s for the frozen transaction", time.Since(start).Round(time.Millisecond))
	if err := tx.Commit(context.Background()); err == nil {
		t.Error("the frozen owner's transaction committed after the takeover")
	}
}

package pgcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/testinfra/pgcluster"
)

// TestStartReuseStop runs the throwaway cluster path for real: it is what
// pgtest and the local stack fall back to on a machine with no server.
func TestStartReuseStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "txfence-pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port, err := pgcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgcluster.Start(ctx, dir, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })

	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	var user string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != "postgres" {
		t.Errorf("current_user = %q, %v", user, err)
	}
	_ = conn.Close(ctx)

	// A second Start on the same directory finds the running server.
	again, err := pgcluster.Start(ctx, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if again.Port != port {
		t.Errorf("reused cluster reports port %d, want %d", again.Port, port)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, c.URL()); err == nil {
		t.Error("the cluster still answers after Stop")
	}
}

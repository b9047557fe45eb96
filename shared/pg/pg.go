// Package pg is how txfence services use PostgreSQL: a pgx pool set up the
// same way everywhere, numbered migrations embedded in each service and
// applied by an explicit runner, and a transaction helper that retries
// serialization failures and deadlocks a bounded number of times.
package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/errs"
)

// PoolOptions tune Open. Zero values take pgx's defaults, or the URL's
// pool_max_conns and friends when present.
type PoolOptions struct {
	MaxConns int32
	// Application names the service in pg_stat_activity.
	Application string
	// IdleInTransactionTimeout, when set, makes the server end a session
	// left idle inside a transaction this long, rolling it back and
	// releasing its locks.
	IdleInTransactionTimeout time.Duration
}

// Open connects a pool to url and checks the connection. The URL may set
// search_path (options=-c search_path=...) to place a service, or a test,
// in its own schema.
func Open(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, "parse database URL", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Application != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.Application
	}
	if opts.IdleInTransactionTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(opts.IdleInTransactionTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, errs.Wrap(errs.Unavailable, "database unreachable", err)
	}
	return pool, nil
}

// Ping connects to url once and closes the connection: is a server there,
// and does it let us in? It takes at most five seconds.
func Ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// Check is a readiness check for a pool.
func Check(pool *pgxpool.Pool) func(context.Context) error {
	return func(ctx context.Context) error { return pool.Ping(ctx) }
}

// Beginner is what InTx needs: a pool, a connection or a transaction.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// TxOptions tune InTx.
type TxOptions struct {
	pgx.TxOptions
	// Attempts bounds the tries on a retryable failure; zero means 5.
	Attempts int
	// Logger notes each retry; nil logs nothing.
	Logger *slog.Logger
}

// InTx runs fn in a transaction and commits it. A serialization failure
// (40001) or a deadlock (40P01), at any point up to and including the
// commit, rolls back and runs fn again from the start, with a short
// backoff, up to opts.Attempts times; fn must therefore be safe to re-run
// (no side effects outside the transaction). Any other error from fn rolls
// back and is returned unchanged.
func InTx(ctx context.Context, db Beginner, opts TxOptions, fn func(pgx.Tx) error) error {
	return Retrying(ctx, opts, func() error { return runTx(ctx, db, opts.TxOptions, fn) })
}

// Retrying runs fn, a transaction of its own (such as one statement in
// autocommit), again on a serialization failure or a deadlock, as InTx
// does; opts.TxOptions is not used.
func Retrying(ctx context.Context, opts TxOptions, fn func() error) error {
	attempts := opts.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	backoff := 2 * time.Millisecond
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err == nil || !Retryable(err) || attempt >= attempts {
			break
		}
		if opts.Logger != nil {
			opts.Logger.Debug("retrying transaction", "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	if Retryable(err) {
		return errs.Wrap(errs.Unavailable, fmt.Sprintf("database contention persisted over %d attempts", attempts), err)
	}
	return err
}

func runTx(ctx context.Context, db Beginner, opts pgx.TxOptions, fn func(pgx.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The rollback's own error adds nothing: the transaction is
			// void either way, and the connection is discarded if broken.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// SQLSTATE codes the services act on.
const (
	CodeSerializationFailure = "40001"
	CodeDeadlockDetected     = "40P01"
	CodeUniqueViolation      = "23505"
	CodeCheckViolation       = "23514"
	CodeForeignKeyViolation  = "23503"
)

// Retryable reports whether err is a failure that re-running the whole
// transaction can cure.
func Retryable(err error) bool {
	code := Code(err)
	return code == CodeSerializationFailure || code == CodeDeadlockDetected
}

// Code is err's SQLSTATE, or "" when err did not come from the server.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

package signerd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
)

// CheckpointConfig says how signerd anchors its audit log outside its
// database, from TXFENCE_SIGNER_CHECKPOINT_* variables. Every checkpoint
// goes to the log ("audit checkpoint", the checkpoint under "checkpoint")
// and, when File is set, to that file.
type CheckpointConfig struct {
	// KeyFile holds the zone's checkpoint key (signerctl audit
	// new-checkpoint-key). Required to serve.
	KeyFile string `env:"KEY_FILE"`
	// File, when set, receives each checkpoint as a JSON line, appended
	// and synced. Keep it where the database's owner cannot write, and
	// ship it to the auditor (an append-only volume, a WORM bucket).
	File string `env:"FILE"`
	// Interval bounds how long a new audit record goes unanchored.
	Interval time.Duration `env:"INTERVAL" default:"1m"`
	// Records anchors the head sooner, once this many records were
	// appended since the last checkpoint.
	Records int `env:"RECORDS" default:"10000"`
}

// maxCheckpointInterval bounds Interval: a head left unanchored for long
// is a long window for a rewind nobody can see.
const maxCheckpointInterval = time.Hour

// Validate checks the bounds.
func (c CheckpointConfig) Validate() error {
	var problems []error
	if c.Interval <= 0 || c.Interval > maxCheckpointInterval {
		problems = append(problems, fmt.Errorf("CHECKPOINT_INTERVAL=%s: want more than 0 and at most %s", c.Interval, maxCheckpointInterval))
	}
	if c.Records < 1 {
		problems = append(problems, fmt.Errorf("CHECKPOINT_RECORDS=%d: want at least 1", c.Records))
	}
	return errors.Join(problems...)
}

// readCheckpointKey reads the key file, warning when others may read it.
func readCheckpointKey(path string, log *slog.Logger) (*signer.CheckpointKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	defer clear(data)
	key, err := signer.ParseCheckpointKey(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the checkpoint key file can be read by others than its owner: whoever reads it can sign checkpoints", "file", path, "mode", fi.Mode().Perm().String())
	}
	return key, nil
}

// checkpointer anchors the audit head: at start, whenever Records records
// were appended or Interval passed with new records, and at shutdown.
// Each time, it also checks that the record of the previous checkpoint
// still hashes as it did: a database rewound or rewritten under a running
// signerd is reported (alert=audit_rewritten) and makes signerd unready
// until it restarts. At start, the previous checkpoint is the file's last.
type checkpointer struct {
	key      *signer.CheckpointKey
	store    signer.Store
	file     *os.File // nil: the log only
	log      *slog.Logger
	interval time.Duration
	records  int64
	now      func() time.Time

	pending  atomic.Int64
	kick     chan struct{}
	failures atomic.Int64 // checkpoints not written, for the metric

	mu sync.Mutex // guards the fields below
	// last is the last checkpoint written, or read from the file at start.
	last *signer.Checkpoint
	// failed is why the last checkpoint could not be written; rewritten
	// is why the log no longer matches an earlier checkpoint (sticky).
	failed, rewritten error
}

func newCheckpointer(cfg CheckpointConfig, key *signer.CheckpointKey, store signer.Store, log *slog.Logger) (*checkpointer, error) {
	c := &checkpointer{key: key, store: store, log: log, interval: cfg.Interval, records: int64(cfg.Records), now: time.Now,
		kick: make(chan struct{}, 1)}
	if cfg.File == "" {
		log.Warn("no checkpoint file (TXFENCE_SIGNER_CHECKPOINT_FILE): checkpoints go to the log only")
		return c, nil
	}
	// A last line that does not read (torn by a crash mid-write, say) only
	// costs the check against it: it must not keep signerd from starting.
	last, err := lastCheckpoint(cfg.File)
	if err != nil {
		log.Warn("the checkpoint file's last checkpoint could not be read; not checking the log against it", "file", cfg.File, "err", err)
	}
	if last != nil {
		if good, problems := signer.CheckCheckpoints([]signer.Checkpoint{*last}, []ed25519.PublicKey{key.Public()}); len(good) == 1 {
			c.last = last
		} else {
			log.Warn("the checkpoint file's last line is not a checkpoint of this key; not checking the log against it", "file", cfg.File, "err", errors.Join(problems...))
		}
	}
	if c.file, err = os.OpenFile(cfg.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640); err != nil {
		return nil, fmt.Errorf("checkpoint file: %w", err)
	}
	return c, nil
}

// lastCheckpoint reads the last line of the checkpoint file, nil when the
// file is new or empty. Only the tail is read: the file grows for ever.
func lastCheckpoint(path string) (*signer.Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint file: %w", err)
	}
	defer f.Close()
	const tail = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint file: %w", err)
	}
	buf := make([]byte, min(fi.Size(), tail))
	if _, err := f.ReadAt(buf, fi.Size()-int64(len(buf))); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("checkpoint file: %w", err)
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	last := lines[len(lines)-1]
	if len(last) == 0 {
		return nil, nil
	}
	cp, err := signer.ParseCheckpoint(last)
	if err != nil {
		return nil, fmt.Errorf("checkpoint file %s, last line: %w", path, err)
	}
	return &cp, nil
}

// appended counts records a transaction committed, and asks for a
// checkpoint once enough have piled up.
func (c *checkpointer) appended(n int) {
	if c.pending.Add(int64(n)) >= c.records {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// run checkpoints until ctx ends, then once more (the head after the last
// request served) within a bound of its own.
func (c *checkpointer) run(ctx context.Context) {
	c.checkpoint(ctx)
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			c.checkpoint(final)
			cancel()
			return
		case <-tick.C:
		case <-c.kick:
		}
		c.checkpoint(ctx)
	}
}

// checkpoint anchors the current head unless it is already anchored.
func (c *checkpointer) checkpoint(ctx context.Context) {
	c.pending.Store(0) // appends from here on count toward the next one
	head, err := c.store.AuditHead(ctx)
	if err != nil {
		c.setFailed(fmt.Errorf("read the audit head: %w", err))
		return
	}
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil {
		if last.Seq == head.Seq && last.Hash == head.Hash {
			c.setFailed(nil)
			return
		}
		if err := c.stillAnchored(ctx, *last, head); err != nil {
			c.log.Error("the audit log no longer matches signerd's last checkpoint: it was rewound or rewritten in the database", "alert", "audit_rewritten",
				"err", err, "checkpoint_seq", last.Seq, "checkpoint_hash", last.Hash.Hex(), "head_seq", head.Seq)
			c.mu.Lock()
			c.rewritten = err
			c.mu.Unlock()
		}
	}
	cp := c.key.Sign(head, c.now())
	// The log first: a checkpoint the file could not take is still
	// anchored in the log stream.
	c.log.Info("audit checkpoint", "checkpoint", cp)
	if c.file != nil {
		line, err := json.Marshal(cp)
		if err == nil {
			_, err = c.file.Write(append(line, '\n'))
		}
		if err == nil {
			err = c.file.Sync()
		}
		if err != nil {
			c.setFailed(fmt.Errorf("write checkpoint %d to %s: %w", cp.Seq, c.file.Name(), err))
			return
		}
	}
	c.mu.Lock()
	c.last, c.failed = &cp, nil
	c.mu.Unlock()
}

// stillAnchored checks that the log still holds the record last anchored:
// the head has not gone below it, and it hashes as it did.
func (c *checkpointer) stillAnchored(ctx context.Context, last signer.Checkpoint, head signer.AuditHead) error {
	if head.Seq < last.Seq {
		return fmt.Errorf("the head is at record %d, below the checkpoint at %d", head.Seq, last.Seq)
	}
	if last.Seq == 0 {
		return nil
	}
	recs, err := c.store.Audit(ctx, last.Seq-1, 1)
	if err != nil {
		return fmt.Errorf("read record %d: %w", last.Seq, err)
	}
	if len(recs) == 0 || recs[0].Entry.Seq != last.Seq {
		return fmt.Errorf("record %d, which the checkpoint anchors, is gone", last.Seq)
	}
	if recs[0].Hash != last.Hash {
		return fmt.Errorf("record %d hashes to %s, not %s as when it was anchored", last.Seq, recs[0].Hash.Hex(), last.Hash.Hex())
	}
	return nil
}

func (c *checkpointer) setFailed(err error) {
	c.mu.Lock()
	c.failed = err
	c.mu.Unlock()
	if err != nil {
		c.failures.Add(1)
		c.log.Error("audit checkpoint failed", "alert", "audit_checkpoint_failed", "err", err)
	}
}

// export registers the checkpointer's metrics: what an alert needs to see
// that the head stopped being anchored, or was found rewritten.
func (c *checkpointer) export(reg *textmetrics.Registry) {
	lastOf := func(field func(*signer.Checkpoint) float64) func() float64 {
		return func() float64 {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.last == nil {
				return 0
			}
			return field(c.last)
		}
	}
	reg.Gauge("txfence_signer_audit_checkpoint_seq", "Audit record sequence of the last checkpoint written (0: none yet).",
		lastOf(func(cp *signer.Checkpoint) float64 { return float64(cp.Seq) }))
	reg.Gauge("txfence_signer_audit_checkpoint_timestamp_seconds", "Time of the last checkpoint written, in Unix seconds (0: none yet). Alert when it falls behind the checkpoint interval.",
		lastOf(func(cp *signer.Checkpoint) float64 { return float64(cp.At.UnixNano()) / 1e9 }))
	reg.CounterFunc("txfence_signer_audit_checkpoint_failures_total", "Checkpoints that could not be made: the head not read, or the file not written.",
		func() float64 { return float64(c.failures.Load()) })
	reg.Gauge("txfence_signer_audit_rewritten", "1 once the audit log was found rewound or rewritten below a checkpoint (until signerd restarts). Page on 1.",
		func() float64 {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.rewritten != nil {
				return 1
			}
			return 0
		})
}

// ready is the readiness check: signerd is not ready while its head cannot
// be anchored, nor once its log was found rewritten under it.
func (c *checkpointer) ready(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rewritten != nil {
		return fmt.Errorf("audit log rewritten under signerd: %w", c.rewritten)
	}
	return c.failed
}

// close closes the checkpoint file and destroys the key.
func (c *checkpointer) close() {
	if c.file != nil {
		_ = c.file.Close()
	}
	c.key.Destroy()
}

// countingStore tells the checkpointer how many audit records each
// committed transaction appended.
type countingStore struct {
	signer.Store
	appended func(n int)
}

func (s countingStore) InTx(ctx context.Context, fn func(signer.StoreTx) error) error {
	var n int
	err := s.Store.InTx(ctx, func(tx signer.StoreTx) error {
		n = 0 // fn runs again on a retry
		return fn(countingTx{StoreTx: tx, n: &n})
	})
	if err == nil && n > 0 {
		s.appended(n)
	}
	return err
}

type countingTx struct {
	signer.StoreTx
	n *int
}

func (t countingTx) Append(ctx context.Context, entries []signer.AuditEntry) ([]signer.AuditRecord, error) {
	records, err := t.StoreTx.Append(ctx, entries)
	*t.n += len(records)
	return records, err
}

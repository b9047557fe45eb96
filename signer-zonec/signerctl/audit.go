package signerctl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/pg"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/postgres"
)

const auditUsage = "usage: signerctl audit verify [--checkpoints FILE --public-key KEY ...] | signerctl audit export [-after SEQ] | signerctl audit new-checkpoint-key --out FILE"

// auditCommand is `signerctl audit verify`, `signerctl audit export
// [-after SEQ]` and `signerctl audit new-checkpoint-key --out FILE`. verify and
// export are run by operators and auditors against signerd's database
// (TXFENCE_SIGNER_DATABASE_URL; a role that may read audit_log,
// audit_head and signature is enough).
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(auditUsage)
	}
	if args[0] == "new-checkpoint-key" {
		return newCheckpointKeyCommand(args[1:], stdout)
	}
	var cfg struct {
		DatabaseURL string `env:"DATABASE_URL" required:"true"`
	}
	if err := config.Load(envPrefix, getenv, &cfg); err != nil {
		return err
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolOptions{MaxConns: 2, Application: "signerctl audit"})
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)

	switch args[0] {
	case "verify":
		return verifyCommand(ctx, store, args[1:], stdout)
	case "export":
		fs := flag.NewFlagSet("audit export", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		after := fs.Uint64("after", 0, "export records after this sequence number")
		if err := fs.Parse(args[1:]); err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		_, err := store.ExportAudit(ctx, *after, stdout)
		return err
	default:
		return fmt.Errorf("unknown audit command %q; %s", args[0], auditUsage)
	}
}

// verifyCommand checks the hash chain and the head, the double-sign record
// against the log, and, given checkpoints and the checkpoint public key
// (repeat --public-key for keys used before a rotation), that the log
// still reaches and matches every checkpoint. It names every problem.
func verifyCommand(ctx context.Context, store *postgres.Store, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("checkpoints", "", "a checkpoint file, or signerd's JSON log lines of its audit checkpoints")
	var keys []ed25519.PublicKey
	fs.Func("public-key", "the checkpoint public key (base64), as signerctl audit new-checkpoint-key printed it", func(s string) error {
		k, err := signer.ParseCheckpointPublicKey(s)
		if err == nil {
			keys = append(keys, k)
		}
		return err
	})
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("audit verify: %w; %s", err, auditUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("audit verify: unexpected arguments %s; %s", strings.Join(fs.Args(), " "), auditUsage)
	}
	if (*file == "") != (len(keys) == 0) {
		return fmt.Errorf("audit verify: --checkpoints and --public-key go together; %s", auditUsage)
	}

	var good []signer.Checkpoint
	var problems []error
	if *file != "" {
		cps, err := readCheckpoints(*file)
		if err != nil {
			return err
		}
		good, problems = signer.CheckCheckpoints(cps, keys)
	}
	n, err := store.VerifyAudit(ctx, good...)
	problems = append(problems, err)
	if err := errors.Join(problems...); err != nil {
		var chain *signer.ChainError
		var cp *signer.CheckpointError
		var sig *signer.SignatureError
		if errors.As(err, &chain) || errors.As(err, &cp) || errors.As(err, &sig) {
			return fmt.Errorf("audit log BROKEN (%d records verified):\n%w", n, err)
		}
		return err
	}
	head, err := store.AuditHead(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "audit log intact: %d records, head %d %s; every signature has its record\n", n, head.Seq, head.Hash.Hex())
	if *file != "" {
		fmt.Fprintf(stdout, "held to %d checkpoints of %s: the log reaches and matches each\n", len(good), *file)
	}
	return nil
}

// newCheckpointKeyCommand writes a new checkpoint key file for signerd
// (TXFENCE_SIGNER_CHECKPOINT_KEY_FILE) and prints its public key, which
// the auditor keeps to verify checkpoints with.
func newCheckpointKeyCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit new-checkpoint-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "the key file to create (mode 0600, never overwritten)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *out == "" {
		return fmt.Errorf("audit new-checkpoint-key needs --out FILE and nothing else; %s", auditUsage)
	}
	key, err := newCheckpointKey(*out)
	if err != nil {
		return err
	}
	defer key.Destroy()
	_, err = fmt.Fprintln(stdout, signer.EncodeCheckpointPublicKey(key.Public()))
	return err
}

// newCheckpointKey writes a new key file at path (created, mode 0600,
// never overwritten) and returns the public key to hand to the auditor.
func newCheckpointKey(path string) (*signer.CheckpointKey, error) {
	key, data, err := signer.GenerateCheckpointKey()
	if err != nil {
		return nil, err
	}
	defer clear(data)
	// O_EXCL: an existing key is never overwritten, so a slip of --out
	// cannot destroy the key older checkpoints were signed with.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		key.Destroy()
		return nil, fmt.Errorf("create the checkpoint key file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		key.Destroy()
		os.Remove(path)
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}

// readCheckpoints reads a checkpoint file, or signerd's JSON log filtered
// to its "audit checkpoint" lines, numbering each checkpoint by its line.
func readCheckpoints(path string) ([]signer.Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	defer f.Close()
	var cps []signer.Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		cp, err := signer.ParseCheckpoint(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		cp.Line = line
		cps = append(cps, cp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(cps) == 0 {
		return nil, fmt.Errorf("%s holds no checkpoint", path)
	}
	return cps, nil
}

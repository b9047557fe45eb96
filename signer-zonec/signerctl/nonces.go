package signerctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/postgres"
)

const noncesUsage = "usage: signerctl nonces start --chain-id ID --signer ADDRESS --nonce N | signerctl nonces list [--json]"

// noncesCommand is `signerctl nonces start|list`: the next nonce of an
// account with history on chain from before signerd, which signerd cannot
// know (it never talks to a chain) and without which it refuses the
// account's nonces beyond MAX_NONCE_AHEAD. start runs as the tables' owner
// (TXFENCE_SIGNER_OWNER_DATABASE_URL): the serving role may only read
// the starts. Read the account's next nonce from the chain (its pending
// transaction count) just before, and declare no more than that.
func noncesCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "start" && args[0] != "list") {
		return errors.New(noncesUsage)
	}
	fs := flag.NewFlagSet("signerctl nonces "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var start postgres.NonceStart
	var asJSON bool
	if args[0] == "start" {
		fs.Func("chain-id", "the chain `ID`", uintFlag(&start.ChainID))
		fs.Func("signer", "the account's `ADDRESS`", func(s string) error {
			if !common.IsHexAddress(s) {
				return fmt.Errorf("%q is not an address", s)
			}
			start.Signer = common.HexToAddress(s)
			return nil
		})
		fs.Func("nonce", "the account's next nonce `N` on that chain", uintFlag(&start.Nonce))
	} else {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("nonces %s: %w; %s", args[0], err, noncesUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("nonces %s: unexpected %q; %s", args[0], fs.Args(), noncesUsage)
	}
	if args[0] == "start" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		var missing []string
		fs.VisitAll(func(f *flag.Flag) {
			if !set[f.Name] {
				missing = append(missing, "--"+f.Name)
			}
		})
		if len(missing) > 0 {
			return fmt.Errorf("nonces start needs %v; %s", missing, noncesUsage)
		}
	}

	var cfg struct {
		OwnerDatabaseURL string `env:"OWNER_DATABASE_URL"`
		DatabaseURL      string `env:"DATABASE_URL"`
	}
	if err := config.Load(envPrefix, getenv, &cfg); err != nil {
		return err
	}
	url := cfg.OwnerDatabaseURL
	if url == "" {
		url = cfg.DatabaseURL
	}
	if url == "" {
		return errors.New("TXFENCE_SIGNER_OWNER_DATABASE_URL (the role that owns signerd's tables; for list, any role that may read nonce_start) is required")
	}
	pool, err := pg.Open(ctx, url, pg.PoolOptions{MaxConns: 1, Application: "signerctl nonces"})
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)

	if args[0] == "list" {
		starts, err := store.NonceStarts(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(starts)
		}
		for _, s := range starts {
			fmt.Fprintf(stdout, "chain %d  %s  next nonce %d  (set %s)\n", s.ChainID, s.Signer.Hex(), s.Nonce, s.SetAt.UTC().Format("2006-01-02T15:04:05Z"))
		}
		return nil
	}
	before, err := store.DeclareNonceStart(ctx, start)
	if err != nil {
		return err
	}
	was := "none"
	if before != nil {
		was = strconv.FormatUint(before.Nonce, 10)
	}
	fmt.Fprintf(stdout, "chain %d  %s  next nonce %d (was %s)\n", start.ChainID, start.Signer.Hex(), start.Nonce, was)
	return nil
}

// uintFlag parses a decimal uint64 flag into dst.
func uintFlag(dst *uint64) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n > 1<<63-1 {
			return fmt.Errorf("%q is not a number from 0 to 2^63-1", s)
		}
		*dst = n
		return nil
	}
}

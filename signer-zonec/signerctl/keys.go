package signerctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/txfence/txfence/shared/config"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/keystore"
	"github.com/txfence/txfence/signer-zonec/vault"
)

// The key backends keys manages (TXFENCE_SIGNER_KEY_BACKEND): signerd's
// Vault, and the development keystore that signerd-dev serves from.
const (
	backendVault    = "vault"
	backendKeystore = "keystore"
)

// keyConfig says where the keys are, from TXFENCE_SIGNER_* variables:
// KEY_BACKEND, and the chosen backend's VAULT_* or KEYSTORE_* settings,
// as signerd (or signerd-dev) reads them.
type keyConfig struct {
	// KeyBackend is "vault" or "keystore". Unset, it is vault when
	// VAULT_ADDR is set, and nothing otherwise: the development keystore
	// is only ever chosen by name, as signerd-dev chooses it.
	KeyBackend string          `env:"KEY_BACKEND" usage:"vault or keystore"`
	Vault      vault.Config    `envprefix:"VAULT_"`
	Keystore   keystore.Config `envprefix:"KEYSTORE_"`
}

// backend is the key backend in use, "" when none is configured.
func (c keyConfig) backend() string {
	switch {
	case c.KeyBackend != "":
		return c.KeyBackend
	case c.Vault.Enabled():
		return backendVault
	}
	return ""
}

// Validate checks that the chosen backend has its settings.
func (c keyConfig) Validate() error {
	switch c.backend() {
	case "":
	case backendVault:
		if !c.Vault.Enabled() {
			return errors.New("KEY_BACKEND=vault needs VAULT_ADDR")
		}
	case backendKeystore:
		if c.Keystore.Dir == "" {
			return errors.New("KEY_BACKEND=keystore needs KEYSTORE_DIR")
		}
		if c.Keystore.PassphraseFile == "" && c.Keystore.Passphrase == "" {
			return errors.New("KEY_BACKEND=keystore needs KEYSTORE_PASSPHRASE_FILE (or KEYSTORE_PASSPHRASE)")
		}
	default:
		return fmt.Errorf("KEY_BACKEND=%q: want vault or keystore", c.KeyBackend)
	}
	return nil
}

// keystoreScryptN and keystoreScryptP override the scrypt cost of keys the
// keystore backend writes; tests lower them. Zero: the standard cost.
var keystoreScryptN, keystoreScryptP int

// keyStore is a backend that also creates and imports keys.
type keyStore interface {
	signer.KeyBackend
	Create(ctx context.Context) (signer.KeyInfo, error)
	Import(ctx context.Context, hexKey []byte) (signer.KeyInfo, error)
}

var (
	_ keyStore = (*vault.Backend)(nil)
	_ keyStore = (*keystore.Backend)(nil)
)

// openKeyStore opens the key backend cfg chooses. Vault must answer,
// unsealed, and accept the operator's credentials. The caller closes it,
// which destroys the keys it unwrapped.
func openKeyStore(ctx context.Context, cfg keyConfig) (keyStore, error) {
	switch cfg.backend() {
	case backendVault:
		b, err := vault.Open(ctx, cfg.Vault, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		return b, nil
	case backendKeystore:
		ks := cfg.Keystore
		if keystoreScryptN != 0 {
			ks.ScryptN, ks.ScryptP = keystoreScryptN, keystoreScryptP
		}
		b, err := keystore.Open(ks)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "":
		return nil, errors.New("no key backend configured: set TXFENCE_SIGNER_KEY_BACKEND (vault or keystore) and its settings")
	}
	return nil, fmt.Errorf("unknown key backend %q", cfg.KeyBackend)
}

// maxKeyInput bounds what keys import reads from standard input.
const maxKeyInput = 4 << 10

// keysCommand runs `signerctl keys new|import|list [--json]`; args are the
// arguments after "keys". Settings come from the environment (keyConfig,
// prefix TXFENCE_SIGNER_).
//
//   - new creates a key in the backend and prints its address and backend.
//   - import reads one hex private key from stdin (never from an argument,
//     which would land in shell history and the process list), stores it,
//     and prints its address and backend.
//   - list prints every key's address and backend, one per line, or a JSON
//     array with --json.
//
// No command prints or logs a private key.
func keysCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	const usage = "usage: signerctl keys new | import (the hex key on standard input) | list [--json]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	cmd, rest := args[0], args[1:]
	jsonOut := false
	switch {
	case cmd == "list" && len(rest) == 1 && (rest[0] == "--json" || rest[0] == "-json"):
		jsonOut = true
	case cmd == "import" && len(rest) > 0:
		// Do not echo the arguments: they may be the key.
		return errors.New("signerctl keys import reads the private key from standard input, never from an argument (which would land in shell history); " + usage)
	case cmd != "new" && cmd != "import" && cmd != "list":
		return fmt.Errorf("unknown keys command %q; %s", cmd, usage)
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments after keys %s: %s; %s", cmd, strings.Join(rest, " "), usage)
	}

	var cfg keyConfig
	if err := config.Load(envPrefix, getenv, &cfg); err != nil {
		return fmt.Errorf("signerctl keys configuration:\n%w", err)
	}
	ks, err := openKeyStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer ks.Close()

	switch cmd {
	case "new":
		info, err := ks.Create(ctx)
		if err != nil {
			return err
		}
		return printKeys(stdout, []signer.KeyInfo{info}, false)
	case "import":
		if stdin == nil {
			return errors.New("signerctl keys import: no standard input")
		}
		buf, err := io.ReadAll(io.LimitReader(stdin, maxKeyInput+1))
		if err != nil {
			clear(buf)
			return fmt.Errorf("read the private key from standard input: %w", err)
		}
		if len(buf) > maxKeyInput {
			clear(buf)
			return errors.New("standard input holds more than a private key")
		}
		info, err := ks.Import(ctx, buf) // clears buf
		if err != nil {
			return err
		}
		return printKeys(stdout, []signer.KeyInfo{info}, false)
	default: // list
		infos, err := ks.List(ctx)
		if err != nil {
			return err
		}
		return printKeys(stdout, infos, jsonOut)
	}
}

// printKeys writes "ADDRESS BACKEND" lines, or a JSON array of
// {"address", "backend"} objects.
func printKeys(w io.Writer, infos []signer.KeyInfo, asJSON bool) error {
	if asJSON {
		type key struct {
			Address string `json:"address"`
			Backend string `json:"backend"`
		}
		out := make([]key, 0, len(infos))
		for _, i := range infos {
			out = append(out, key{Address: i.Address.Hex(), Backend: i.Backend})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, i := range infos {
		if _, err := fmt.Fprintf(w, "%s %s\n", i.Address.Hex(), i.Backend); err != nil {
			return err
		}
	}
	return nil
}

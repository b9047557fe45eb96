package signerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/vault"
)

// The key backends signerd can use (TXFENCE_SIGNER_KEY_BACKEND). Deployed
// signerd serves from Vault only; the keystore is signerd-dev's.
const (
	BackendVault    = "vault"
	BackendKeystore = "keystore"
)

// KeyConfig says where signerd's keys are, from TXFENCE_SIGNER_*
// variables: KEY_BACKEND and VAULT_*.
type KeyConfig struct {
	// KeyBackend is "vault", or the name of the backend a development
	// build adds ("keystore" in signerd-dev). Unset, it is vault when
	// VAULT_ADDR is set, and nothing (no keys, so no signatures)
	// otherwise: there is no silent default, and a development backend
	// is only ever chosen by name.
	KeyBackend string       `env:"KEY_BACKEND" usage:"vault (keystore: signerd-dev only)"`
	Vault      vault.Config `envprefix:"VAULT_"`

	// local is the backend this build serves from beside Vault; nil in
	// deployed signerd.
	local *LocalBackend
}

// LocalBackend is a key backend that a development build of signerd
// serves from beside Vault: signerd-dev adds the local keystore
// (devsignerd.Keystore). Deployed signerd, cmd/signerd, has none and links
// none.
type LocalBackend struct {
	// Name is its TXFENCE_SIGNER_KEY_BACKEND value.
	Name string
	// Open opens it from signerd's environment (TXFENCE_SIGNER_*
	// variables). Closing it destroys the keys it unwrapped.
	Open func(ctx context.Context, getenv func(string) string, log *slog.Logger) (signer.KeyBackend, error)
}

// Backend is the key backend in use, "" when none is configured.
func (c KeyConfig) Backend() string {
	switch {
	case c.KeyBackend != "":
		return c.KeyBackend
	case c.Vault.Enabled():
		return BackendVault
	}
	return ""
}

// Validate checks that the chosen backend is in this build and has its
// settings. A development backend checks its own settings when it opens.
func (c KeyConfig) Validate() error {
	switch b := c.Backend(); {
	case b == "":
	case b == BackendVault:
		if !c.Vault.Enabled() {
			return errors.New("KEY_BACKEND=vault needs VAULT_ADDR")
		}
	case c.local != nil && b == c.local.Name:
	case b == BackendKeystore:
		return errors.New("TXFENCE_SIGNER_KEY_BACKEND=keystore: the development keystore is not built into signerd, which serves keys from Vault only (KEY_BACKEND=vault and its VAULT_* settings); development stacks and tests run signerd-dev (cmd/signerd-dev), which has it")
	default:
		return fmt.Errorf("KEY_BACKEND=%q: want %s", c.KeyBackend, c.backendNames())
	}
	return nil
}

// backendNames names the backends this build serves from.
func (c KeyConfig) backendNames() string {
	if c.local != nil {
		return BackendVault + " or " + c.local.Name
	}
	return BackendVault
}

// openKeys opens the key backend cfg chooses. Vault must answer, unsealed,
// and accept signerd's credentials. The caller closes it, which destroys
// the keys it unwrapped.
func openKeys(ctx context.Context, cfg KeyConfig, getenv func(string) string, log *slog.Logger) (signer.KeyBackend, error) {
	switch b := cfg.Backend(); {
	case b == BackendVault:
		v, err := vault.Open(ctx, cfg.Vault, log)
		if err != nil {
			return nil, err
		}
		return v, nil
	case cfg.local != nil && b == cfg.local.Name:
		return cfg.local.Open(ctx, getenv, log)
	case b == "":
		return nil, fmt.Errorf("no key backend configured: set TXFENCE_SIGNER_KEY_BACKEND (%s) and its settings", cfg.backendNames())
	}
	return nil, fmt.Errorf("unknown key backend %q", cfg.KeyBackend)
}

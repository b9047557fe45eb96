// Package devsignerd is signerd for development stacks and tests: deployed
// signerd plus the local keystore (package keystore) as a key backend,
// TXFENCE_SIGNER_KEY_BACKEND=keystore. cmd/signerd-dev runs it, and so do
// make run and signerd's tests. Never deploy it: the keystore's passphrase
// sits in the process's memory and its files on its disk. cmd/signerd,
// which holds real keys, serves from Vault only and links no keystore.
package devsignerd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/txfence/txfence/shared/config"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/keystore"
	"github.com/txfence/txfence/signer-zonec/signerd"
)

// Run runs signerd with the development keystore beside Vault; it takes
// what signerd.Run takes.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return signerd.RunWith(Keystore)(ctx, args, getenv, stdout)
}

// Keystore is the local keystore as signerd's key backend, set up by
// TXFENCE_SIGNER_KEYSTORE_DIR and KEYSTORE_PASSPHRASE_FILE (or
// KEYSTORE_PASSPHRASE).
var Keystore = signerd.LocalBackend{Name: signerd.BackendKeystore, Open: openKeystore}

func openKeystore(_ context.Context, getenv func(string) string, log *slog.Logger) (signer.KeyBackend, error) {
	prefix := signerd.Spec.EnvPrefix + "KEYSTORE_"
	var cfg keystore.Config
	if err := config.Load(prefix, getenv, &cfg); err != nil {
		return nil, fmt.Errorf("keystore configuration:\n%w", err)
	}
	log.Warn("keys from the development keystore: its passphrase stays in this process's memory; deployments run signerd, with Vault", "keystore_dir", cfg.Dir)
	b, err := keystore.Open(cfg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Package signerd wires the signer daemon together: configuration, its own
// database, the key backend (Vault or a local keystore), the policy file,
// the signing API that only txmanager may call, and the operator commands.
// cmd/signerd calls Run; tests call it too.
package signerd

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpserver"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/httpapi"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/vault"
)

// Config is signerd's configuration, from TXFENCE_SIGNER_* variables. Its
// database is its own: no other service may share it.
type Config struct {
	daemon.Base
	daemon.Database
	KeyConfig
	// PolicyFile is the signing policy, loaded once at start; its hash is
	// in every audit record. Required to serve.
	PolicyFile string `env:"POLICY_FILE"`
	// LockMemory locks signerd's memory (mlockall) so unwrapped keys stay
	// out of swap. Turn it off only where a process must not lock memory
	// (tests running signerd inside a larger process).
	LockMemory bool `env:"LOCK_MEMORY" default:"true"`
}

// Spec names signerd.
var Spec = daemon.Spec{Binary: "signerd", Identity: "signer", EnvPrefix: "TXFENCE_SIGNER_", Migrations: postgres.Migrations}

// Run runs signerd: `serve` (the default), `migrate`, or an operator
// command: `keys new|import|list`, `audit verify|export`,
// `approver new|sign`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "keys":
			return keysCommand(ctx, args[1:], getenv, os.Stdin, stdout)
		case "audit":
			return auditCommand(ctx, args[1:], getenv, stdout)
		case "approver":
			return approverCommand(args[1:], os.Stdin, stdout)
		}
	}
	var cfg Config
	svc, err := daemon.Setup(ctx, Spec, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()
	if cfg.LockMemory {
		lockMemory(svc.Log)
	}

	if cfg.PolicyFile == "" {
		return errors.New("TXFENCE_SIGNER_POLICY_FILE is required to serve: signerd signs nothing without a policy")
	}
	pol, err := policy.Load(cfg.PolicyFile)
	if err != nil {
		return err
	}
	svc.Log.Info("policy loaded", "policy_version", pol.Version(), "policy_hash", pol.Hash().Hex(), "chains", pol.Chains())

	keys, err := openKeyStore(ctx, cfg.KeyConfig, svc.Log)
	if err != nil {
		return err
	}
	defer keys.Close()
	if v, ok := keys.(*vault.Backend); ok {
		svc.HTTP.AddReadyCheck(httpserver.Check{Name: "vault", Fn: v.Ready})
	}

	service := &signer.Service{Keys: keys, Policy: pol, Store: postgres.New(svc.DB), Now: time.Now}
	httpapi.New(service, svc.HTTP.Registry()).Mount(svc.HTTP.Router)
	return svc.Serve(ctx)
}

// Package signerd wires the signer daemon together: configuration, its own
// database, the key backend (Vault, or in a development build the local
// keystore), the policy file, the signing API that only txmanager may call,
// and the migrate step. cmd/signerd calls Run; cmd/signerd-dev calls
// RunWith through package devsignerd; tests call both. The operator's
// commands are package signerctl's.
package signerd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/hardening"
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
	// MaxNonceAhead bounds how far above a sender's next nonce a fresh
	// nonce is signed (signer.Service.MaxNonceAhead).
	MaxNonceAhead uint64 `env:"MAX_NONCE_AHEAD" default:"64"`
	// LockMemory locks signerd's memory (mlockall) so unwrapped keys stay
	// out of swap. Turn it off only where a process must not lock memory
	// (tests running signerd inside a larger process).
	LockMemory bool `env:"LOCK_MEMORY" default:"true"`
	// AllowPrivilegedDatabaseRole lets signerd serve as a role that owns
	// its tables or holds more than serving needs. Development only: such
	// a role can switch the audit log's append-only triggers off.
	AllowPrivilegedDatabaseRole bool `env:"ALLOW_PRIVILEGED_DATABASE_ROLE"`
	// Checkpoint anchors the audit log outside the database.
	Checkpoint CheckpointConfig `envprefix:"CHECKPOINT_"`
}

// maxNonceAheadLimit caps MAX_NONCE_AHEAD: a bound in the thousands is
// no bound against stockpiling.
const maxNonceAheadLimit = 1024

// keepCoreDumps leaves the process as it is. Only this package's tests set
// it: they run signerd inside the test binary, which must stay debuggable
// (package hardening checks the real thing in a child process,
// TestServeDisablesCoreDumps in the binary).
var keepCoreDumps bool

// Spec names signerd.
var Spec = daemon.Spec{Binary: "signerd", Identity: "signer", EnvPrefix: "TXFENCE_SIGNER_", Migrations: postgres.Migrations}

// Run runs signerd as it is deployed, its keys in Vault: `serve` (the
// default) or `migrate` (as the owner of its tables; see migrateCommand).
// The operator's commands (keys, audit) and the approvers' (approver) are
// signerctl's, so that the serving binary links none of what they need.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return run(ctx, args, getenv, stdout, nil)
}

// RunWith returns the Run of a development build of signerd, which also
// serves keys from local: signerd-dev (devsignerd.Run) with the keystore.
func RunWith(local LocalBackend) daemon.RunFunc {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		return run(ctx, args, getenv, stdout, &local)
	}
}

// run is Run with the development key backend local, nil in deployed
// signerd.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, local *LocalBackend) error {
	if len(args) > 0 {
		switch args[0] {
		case daemon.Migrate:
			return migrateCommand(ctx, args[1:], getenv, stdout)
		case "keys", "audit", "approver":
			return fmt.Errorf("%[1]s is signerctl's: run signerctl %[1]s (cmd/signerctl), which keeps the operator's commands out of the serving binary", args[0])
		}
	}
	cfg := Config{KeyConfig: KeyConfig{local: local}}
	// The Prometheus client and its protobuf runtime are 45 packages of
	// attack surface for a few counters: the zone writes its exposition
	// itself, under the names the client would use.
	exported := textmetrics.NewRegistry()
	exported.RegisterProcess()
	svc, err := daemon.Setup(ctx, Spec, httpserver.TextMetrics(exported, Spec.Identity), args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()
	if !keepCoreDumps {
		if err := hardening.PreventCoreDumps(); err != nil {
			return err
		}
		svc.Log.Info("core dumps disabled (RLIMIT_CORE 0, PR_SET_DUMPABLE 0): keys stay out of core files, and other processes of signerd's user cannot attach to it")
	}
	if cfg.LockMemory {
		if err := hardening.LockMemory(); err != nil {
			svc.Log.Warn("memory not locked: keys may reach swap; grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK", "err", err)
		} else {
			svc.Log.Info("memory locked (mlockall): keys stay out of swap")
		}
	}
	if err := checkDatabaseRole(ctx, svc, cfg.AllowPrivilegedDatabaseRole, getenv); err != nil {
		return err
	}

	if cfg.MaxNonceAhead < 1 || cfg.MaxNonceAhead > maxNonceAheadLimit {
		return fmt.Errorf("TXFENCE_SIGNER_MAX_NONCE_AHEAD=%d: want 1 to %d (how many nonces from a sender's next one signerd signs)", cfg.MaxNonceAhead, maxNonceAheadLimit)
	}
	if cfg.PolicyFile == "" {
		return errors.New("TXFENCE_SIGNER_POLICY_FILE is required to serve: signerd signs nothing without a policy")
	}
	pol, err := policy.Load(cfg.PolicyFile)
	if err != nil {
		return err
	}
	svc.Log.Info("policy loaded", "policy_version", pol.Version(), "policy_hash", pol.Hash().Hex(), "chains", pol.Chains())

	keys, err := openKeys(ctx, cfg.KeyConfig, getenv, svc.Log)
	if err != nil {
		return err
	}
	defer keys.Close()
	if v, ok := keys.(*vault.Backend); ok {
		svc.HTTP.AddReadyCheck(httpserver.Check{Name: "vault", Fn: v.Ready})
	}

	if cfg.Checkpoint.KeyFile == "" {
		return errors.New("TXFENCE_SIGNER_CHECKPOINT_KEY_FILE is required to serve: signerd anchors its audit log outside its database with signed checkpoints (create a key with signerctl audit new-checkpoint-key)")
	}
	checkpointKey, err := readCheckpointKey(cfg.Checkpoint.KeyFile, svc.Log)
	if err != nil {
		return err
	}
	store := postgres.New(svc.DB)
	checkpoints, err := newCheckpointer(cfg.Checkpoint, checkpointKey, store, svc.Log)
	if err != nil {
		checkpointKey.Destroy()
		return err
	}
	defer checkpoints.close()
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "audit_checkpoint", Fn: checkpoints.ready})
	checkpoints.export(exported)

	service := &signer.Service{Keys: keys, Policy: pol, Store: countingStore{Store: store, appended: checkpoints.appended}, MaxNonceAhead: cfg.MaxNonceAhead}
	httpapi.New(service, exported).Mount(svc.HTTP.Router)
	// The last checkpoint anchors the head after the last request served:
	// the checkpointer stops only once the listeners have.
	checkpointCtx, stopCheckpoints := context.WithCancel(context.WithoutCancel(ctx))
	checkpointsDone := make(chan struct{})
	go func() {
		defer close(checkpointsDone)
		checkpoints.run(checkpointCtx)
	}()
	err = svc.Serve(ctx)
	stopCheckpoints()
	<-checkpointsDone
	return err
}

// checkDatabaseRole refuses to serve as a role that could rewrite the
// audit log or the signature record (postgres.CheckServingRole), unless
// allowed for development.
func checkDatabaseRole(ctx context.Context, svc *daemon.Service, allowPrivileged bool, getenv func(string) string) error {
	if getenv(Spec.EnvPrefix+"OWNER_DATABASE_URL") != "" {
		svc.Log.Warn("TXFENCE_SIGNER_OWNER_DATABASE_URL is set while serving: only signerd migrate needs the owner's credentials; keep them out of the serving process")
	}
	err := postgres.CheckServingRole(ctx, svc.DB)
	if err == nil {
		return nil
	}
	var role *postgres.RoleError
	if allowPrivileged && errors.As(err, &role) {
		svc.Log.Warn("serving as a privileged database role (TXFENCE_SIGNER_ALLOW_PRIVILEGED_DATABASE_ROLE, development only): it can switch the audit log's append-only triggers off", "err", err)
		return nil
	}
	if errors.As(err, &role) {
		return fmt.Errorf("%w\nsignerd serves as a role that can append to its audit log and signature record but not change them: run signerd migrate as the owner (TXFENCE_SIGNER_OWNER_DATABASE_URL) with TXFENCE_SIGNER_SERVE_ROLE naming the serving role, and serve with TXFENCE_SIGNER_DATABASE_URL connecting as that role", err)
	}
	return err
}

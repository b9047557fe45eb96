// Package devstack runs the whole txfence stack on one machine for
// development (`make run`): it makes sure PostgreSQL, Redis and a pinned
// anvil are there, issues development certificates, migrates the
// databases, starts the five services as child processes with prefixed
// log lines, prints where everything listens, and on Ctrl-C stops
// everything it started, leaving no process behind.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/mev-router/devrelay"
	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/keystore"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/devcert"
	"github.com/txfence/txfence/testinfra/pgcluster"
	"github.com/txfence/txfence/testinfra/redistest"
)

// EnvPrefix starts the name of every devstack environment variable.
const EnvPrefix = "TXFENCE_DEVSTACK_"

// Config is what can be changed about the local stack.
type Config struct {
	// BinDir holds the five service binaries and signerctl (make build
	// puts them there).
	BinDir string `env:"BIN_DIR" default:".build/bin"`
	// StateDir keeps certificates, a throwaway PostgreSQL cluster and
	// logs between runs; it is git-ignored.
	StateDir string `env:"STATE_DIR" default:".devstack"`
	// DatabaseURL is a superuser URL of the PostgreSQL server to use. Empty
	// means the local server on 127.0.0.1:5432, else a cluster of our own
	// in StateDir.
	DatabaseURL string `env:"DATABASE_URL"`
	// DatabasePrefix starts the name of each service's database.
	DatabasePrefix string `env:"DATABASE_PREFIX" default:"txfence_"`
	// RedisURL empty means the local server on 127.0.0.1:6379, else a
	// redis-server of our own.
	RedisURL string `env:"REDIS_URL"`
	// GatewayAddr is the public API's address.
	GatewayAddr string `env:"GATEWAY_ADDR" default:"127.0.0.1:8080"`
	// BasePort is the first of five consecutive ports for the internal
	// mTLS listeners.
	BasePort  int    `env:"BASE_PORT" default:"7441"`
	AnvilPort int    `env:"ANVIL_PORT" default:"8545"`
	ChainID   uint64 `env:"CHAIN_ID" default:"31337"`
	// SecondAnvilPort and SecondChainID are the stack's second chain, an
	// anvil of another chain id that builds a block every BlockTime: one
	// deployment serves both.
	SecondAnvilPort int    `env:"SECOND_ANVIL_PORT" default:"8547"`
	SecondChainID   uint64 `env:"SECOND_CHAIN_ID" default:"31338"`
	// OwnPostgresPort is where a cluster of our own listens when needed.
	OwnPostgresPort int `env:"OWN_POSTGRES_PORT" default:"55432"`
	OwnRedisPort    int `env:"OWN_REDIS_PORT" default:"56379"`
	// RelayAddr is where the development relay listens; BlockTime is how
	// often it builds a block (the stack's anvil mines only then).
	RelayAddr string        `env:"RELAY_ADDR" default:"127.0.0.1:8546"`
	BlockTime time.Duration `env:"BLOCK_TIME" default:"1s"`
	// SignerPolicyFile is the policy signerd loads. The default allows
	// anvil's dev accounts on chains 31337 and 31338 only.
	SignerPolicyFile string `env:"SIGNER_POLICY_FILE" default:"signer-zonec/testdata/policy/development.json"`
}

// service is one txfence process of the stack.
type service struct {
	identity string // certificate identity, and the log prefix
	binary   string
	prefix   string // environment variable prefix
	database bool
}

// services in start order: each one's callees first. The signer is
// signerd-dev, signerd with the development keystore that holds anvil's
// keys here; deployments run signerd, with Vault.
var services = []service{
	{"signer", "signerd-dev", "TXFENCE_SIGNER_", true},
	{"mevrouter", "mevrouterd", "TXFENCE_MEVROUTER_", false},
	{"txmanager", "txmanagerd", "TXFENCE_TXMANAGER_", true},
	{"ledger", "ledgerd", "TXFENCE_LEDGER_", true},
	{"gateway", "gatewayd", "TXFENCE_GATEWAY_", true},
}

// signerctl is the signer's operator command, which makes signerd's
// checkpoint key.
const signerctl = "signerctl"

// Identity is the certificate identity devstack checks health with; an
// operator's curl can use it too.
const Identity = "devstack"

// Run starts the stack and keeps it up until ctx ends or a service dies.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("devstack takes no arguments (settings come from %s* variables), got %q", EnvPrefix, args)
	}
	var cfg Config
	if err := config.Load(EnvPrefix, getenv, &cfg); err != nil {
		return err
	}
	// Relative paths are the working directory's (make run's is the
	// repository root): made absolute once here, they mean the same to
	// every child, whatever its own working directory. anvil's is a
	// temporary directory, removed when it stops: a relative --state
	// landed there, and every run started a new chain under databases
	// that remembered the old one.
	for _, p := range []*string{&cfg.BinDir, &cfg.StateDir, &cfg.SignerPolicyFile} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	out := newPrefixer(stdout)
	log := slog.New(slog.NewTextHandler(out.writer("devstack"), nil))
	s := &stack{cfg: cfg, out: out, log: log}
	defer s.stop()
	if err := s.start(ctx); err != nil {
		return err
	}
	s.printSummary(stdout)
	select {
	case <-ctx.Done():
		log.Info("stopping the stack")
		return nil
	case exited := <-s.exited:
		return fmt.Errorf("%s exited: %v; stopping the stack", exited.identity, exited.err)
	}
}

type stack struct {
	cfg Config
	out *prefixer
	log *slog.Logger

	certs  string
	signer keystore.Config
	// signerDB is signerd's database: its owner, its serving role and
	// the audit checkpoints it writes.
	signerDB signerDatabase
	// relayURL and relayKeyFile are the development relay's address and
	// mevrouterd's key for it.
	relayURL     string
	relayKeyFile string
	// chainsFile tells txmanagerd which chains and signers it manages;
	// routesFile tells mevrouterd each chain's public endpoints and relays.
	chainsFile string
	routesFile string
	adminURL   string
	redisURL   string
	// chain is the first chain, with the development relay; second the
	// second, public sends only.
	chain, second *anvil.Node
	// earlier are the service databases that existed before this run;
	// ownCluster says PostgreSQL is the cluster devstack runs itself.
	earlier    map[string]bool
	ownCluster bool
	procs      []*process
	exited     chan exit
	// cleanups run in reverse order at stop: what we started, we stop.
	cleanups []func()
}

type exit struct {
	identity string
	err      error
}

func (s *stack) start(ctx context.Context) error {
	s.exited = make(chan exit, len(services))
	binaries := []string{signerctl}
	for _, svc := range services {
		binaries = append(binaries, svc.binary)
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(s.cfg.BinDir, b)); err != nil {
			return fmt.Errorf("service binary missing (%v): run make build, or make run which builds first", err)
		}
	}
	if err := os.MkdirAll(s.cfg.StateDir, 0o755); err != nil {
		return err
	}
	s.certs = filepath.Join(s.cfg.StateDir, "certs")
	identities := []string{Identity}
	for _, svc := range services {
		identities = append(identities, svc.identity)
	}
	if err := devcert.WriteDir(s.certs, identities); err != nil {
		return fmt.Errorf("development certificates: %w", err)
	}
	steps := []struct {
		what string
		fn   func(context.Context) error
	}{
		{"PostgreSQL", s.ensurePostgres},
		{"earlier runs", s.findEarlierRuns},
		{"Redis", s.ensureRedis},
		{"anvil", s.startAnvils},
		{"development relay", s.startRelay},
		{"signer keys", s.signerKeys},
		{"chains files", s.writeChainsFiles},
		{"signer database", s.signerDatabase},
		{"migrations", s.migrate},
		{"admin key", s.adminKey},
		{"services", s.startServices},
	}
	for _, step := range steps {
		if err := step.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
	}
	return nil
}

func (s *stack) ensurePostgres(ctx context.Context) error {
	if s.cfg.DatabaseURL != "" {
		s.adminURL = s.cfg.DatabaseURL
		return pg.Ping(ctx, s.adminURL)
	}
	local := "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=3"
	localErr := pg.Ping(ctx, local)
	if localErr == nil {
		s.adminURL = local
		return nil
	}
	s.log.Info("no PostgreSQL on 127.0.0.1:5432; starting one in the state directory", "reason", localErr)
	c, err := pgcluster.Start(ctx, filepath.Join(s.cfg.StateDir, "postgres"), s.cfg.OwnPostgresPort)
	if err != nil {
		return err
	}
	s.cleanups = append(s.cleanups, func() {
		if err := c.Stop(); err != nil {
			s.log.Error("stop PostgreSQL", "err", err)
		}
	})
	s.adminURL = c.URL()
	s.ownCluster = true
	return nil
}

// findEarlierRuns notes which service databases an earlier run left, and
// refuses a new chain under them.
func (s *stack) findEarlierRuns(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	s.earlier = map[string]bool{}
	for _, svc := range services {
		if !svc.database {
			continue
		}
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, s.databaseName(svc)).Scan(&exists); err != nil {
			return err
		}
		s.earlier[svc.identity] = exists
	}
	return s.requireChainOfDatabases()
}

// databaseName is the name of the service's own database.
func (s *stack) databaseName(svc service) string { return s.cfg.DatabasePrefix + svc.identity }

// databaseURL is the URL of the service's own database, created if missing.
func (s *stack) databaseURL(ctx context.Context, svc service) (string, error) {
	name := s.databaseName(svc)
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	u, err := url.Parse(s.adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func (s *stack) ensureRedis(ctx context.Context) error {
	s.redisURL = s.cfg.RedisURL
	if s.redisURL == "" {
		s.redisURL = "redis://127.0.0.1:6379/0"
		if redistest.Ping(s.redisURL) == nil {
			return nil
		}
		s.redisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", s.cfg.OwnRedisPort)
		s.log.Info("no Redis on 127.0.0.1:6379; starting redis-server", "port", s.cfg.OwnRedisPort)
		p, err := s.spawn("redis", "redis-server", nil, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.cfg.OwnRedisPort),
			"--save", "", "--appendonly", "no")
		if err != nil {
			return fmt.Errorf("start redis-server (install the redis-server package; make setup does): %w", err)
		}
		return waitFor(ctx, p, func() error { return redistest.Ping(s.redisURL) })
	}
	return redistest.Ping(s.redisURL)
}

// anvilStates are the files that keep the anvils' chains between runs.
func (s *stack) anvilStates() []string {
	return []string{filepath.Join(s.cfg.StateDir, "anvil-state.json"), filepath.Join(s.cfg.StateDir, "anvil-second-state.json")}
}

// startAnvils starts the stack's two chains. The first anvil mines only
// when the development relay builds a block, as a chain with a builder
// would: private transactions go into blocks without passing through
// anvil's pool. The second builds a block every BlockTime on its own
// (public sends only). Each chain is kept in the state directory across
// runs (--state: loaded at start, written when anvil stops), like the
// databases: a fresh chain under a database that remembers nonces would
// leave every signer waiting on a nonce gap.
func (s *stack) startAnvils(ctx context.Context) error {
	if s.cfg.SecondChainID == s.cfg.ChainID {
		return fmt.Errorf("%sSECOND_CHAIN_ID is %d, the first chain's id too: give it another", EnvPrefix, s.cfg.ChainID)
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	states := s.anvilStates()
	for i, opts := range []anvil.Options{
		{Port: s.cfg.AnvilPort, ChainID: s.cfg.ChainID, NoMining: true, Output: s.out.writer("anvil"), StateFile: states[0]},
		{Port: s.cfg.SecondAnvilPort, ChainID: s.cfg.SecondChainID, BlockTime: s.cfg.BlockTime, Output: s.out.writer("anvil-" + strconv.FormatUint(s.cfg.SecondChainID, 10)),
			StateFile: states[1]},
	} {
		node, err := anvil.Start(startCtx, opts)
		if err != nil {
			return fmt.Errorf("chain %d: %w", opts.ChainID, err)
		}
		if i == 0 {
			s.chain = node
		} else {
			s.second = node
		}
		s.cleanups = append(s.cleanups, func() {
			if err := node.Stop(); err != nil {
				s.log.Error("stop anvil", "chain_id", opts.ChainID, "err", err)
			}
		})
	}
	return nil
}

// requireChainOfDatabases refuses to start a new chain under databases
// an earlier run left: they remember the old chain's transactions and
// nonces (txmanagerd would wait on nonces the new chain never saw, signerd
// would refuse them as signed already, and ledgerd would halt the chain
// as forked below its books). That happens when anvil-state.json is
// deleted, or was never written (devstack killed with SIGKILL).
func (s *stack) requireChainOfDatabases() error {
	missing := ""
	for _, state := range s.anvilStates() {
		_, err := os.Stat(state)
		if errors.Is(err, fs.ErrNotExist) {
			missing = state
			break
		}
		if err != nil {
			return err
		}
	}
	if missing == "" {
		return nil // the chains are there
	}
	var names []string
	for _, svc := range services {
		if s.earlier[svc.identity] {
			names = append(names, s.databaseName(svc))
		}
	}
	if len(names) == 0 {
		return nil // a first run
	}
	msg := fmt.Sprintf("anvil's chain is not in %s, but the databases %s remain from an earlier run and remember a chain that is gone; start over without them: ",
		missing, strings.Join(names, ", "))
	if s.ownCluster {
		return errors.New(msg + "delete " + filepath.Join(s.cfg.StateDir, "postgres") + " (the cluster devstack runs for itself)")
	}
	drop := []string{"psql", shellQuote(config.MaskURL(s.adminURL))}
	for _, n := range names {
		drop = append(drop, "-c", shellQuote("DROP DATABASE "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"))
	}
	return errors.New(msg + strings.Join(drop, " ") + ", or set " + EnvPrefix + "DATABASE_PREFIX to another prefix")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startRelay runs the development relay (mev-router/devrelay) in this
// process, building a block every BlockTime, and writes the relay-auth key
// mevrouterd signs its relay requests with.
func (s *stack) startRelay(ctx context.Context) error {
	relay, err := devrelay.New(devrelay.Options{NodeURL: s.chain.URL(), ChainID: s.chain.ChainID(),
		Logger: slog.New(slog.NewTextHandler(s.out.writer("devrelay"), nil))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.RelayAddr)
	if err != nil {
		relay.Close()
		return fmt.Errorf("development relay: %w", err)
	}
	s.relayURL = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: relay, ReadHeaderTimeout: 10 * time.Second}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	go func() { _ = srv.Serve(ln) }()
	go func() {
		if err := relay.Run(runCtx, s.cfg.BlockTime); err != nil {
			s.log.Error("development relay stopped building blocks", "err", err)
		}
	}()
	s.cleanups = append(s.cleanups, func() {
		stopRun()
		_ = srv.Close()
		relay.Close()
	})

	s.relayKeyFile = filepath.Join(s.cfg.StateDir, "relay-auth.key")
	if _, err := os.Stat(s.relayKeyFile); errors.Is(err, fs.ErrNotExist) {
		key, err := crypto.GenerateKey()
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.relayKeyFile, []byte(hex.EncodeToString(crypto.FromECDSA(key))), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeChainsFiles writes txmanagerd's chains file and mevrouterd's. The
// first chain is read through two endpoints, anvil under its address and
// under localhost (a development stand-in for two providers: one pool,
// failover and all); the second through its anvil. Each chain's ten dev
// accounts are managed signers, with fee bumps on and cancels allowed
// (the development policy allows them too). mevrouterd sends the first
// chain's transactions to its anvil and the development relay, the
// second's to its anvil.
func (s *stack) writeChainsFiles(context.Context) error {
	type signer struct {
		Address  string `json:"address"`
		FeeBumps bool   `json:"fee_bumps"`
		Cancels  bool   `json:"cancels"`
	}
	signersOf := func(node *anvil.Node) []signer {
		var out []signer
		for _, a := range node.Accounts() {
			out = append(out, signer{Address: a.Address.Hex(), FeeBumps: true, Cancels: true})
		}
		return out
	}
	chains := map[string]any{"chains": []any{
		map[string]any{"chain_id": s.chain.ChainID(), "rpc": s.readEndpoints(s.chain), "confirmations": 2, "signers": signersOf(s.chain)},
		map[string]any{"chain_id": s.second.ChainID(), "rpc": s.readEndpoints(s.second), "confirmations": 2, "signers": signersOf(s.second)},
	}}
	type endpoint struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	routes := map[string]any{"chains": []any{
		map[string]any{"chain_id": s.chain.ChainID(), "public_rpc": []endpoint{{"anvil", s.chain.URL()}}, "relays": []endpoint{{"devrelay", s.relayURL}}},
		map[string]any{"chain_id": s.second.ChainID(), "public_rpc": []endpoint{{"anvil", s.second.URL()}}},
	}}
	s.chainsFile = filepath.Join(s.cfg.StateDir, "chains.json")
	s.routesFile = filepath.Join(s.cfg.StateDir, "mevrouter-chains.json")
	for path, doc := range map[string]any{s.chainsFile: chains, s.routesFile: routes} {
		raw, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readEndpoints are a chain's read endpoints in the stack: the first
// chain's anvil twice (its address and localhost), the second's once.
func (s *stack) readEndpoints(node *anvil.Node) []string {
	if node != s.chain {
		return []string{node.URL()}
	}
	return []string{node.URL(), strings.Replace(node.URL(), "127.0.0.1", "localhost", 1)}
}

// ledgerEndpoints is the ledger's CHAIN_RPC: the same endpoints as
// txmanager's, each chain named once per endpoint.
func (s *stack) ledgerEndpoints() string {
	var pairs []string
	for _, node := range []*anvil.Node{s.chain, s.second} {
		for _, u := range s.readEndpoints(node) {
			pairs = append(pairs, strconv.FormatUint(node.ChainID(), 10)+"="+u)
		}
	}
	return strings.Join(pairs, ",")
}

// signerKeys gives signerd a development keystore in the state directory
// holding anvil's dev accounts, whose keys are public, so the stack signs
// from its first run. The passphrase is random and kept beside the keys;
// the files use scrypt's light cost so signerd unlocks them in
// milliseconds. Nothing about this keystore is fit for real value.
func (s *stack) signerKeys(ctx context.Context) error {
	if _, err := os.Stat(s.cfg.SignerPolicyFile); err != nil {
		return fmt.Errorf("signer policy (TXFENCE_DEVSTACK_SIGNER_POLICY_FILE; make run starts from the repository root): %w", err)
	}
	s.signer = keystore.Config{
		Dir:            filepath.Join(s.cfg.StateDir, "signer-keys"),
		PassphraseFile: filepath.Join(s.cfg.StateDir, "signer-keys.passphrase"),
		ScryptN:        keystore.LightScryptN,
		ScryptP:        keystore.LightScryptP,
	}
	if _, err := os.Stat(s.signer.PassphraseFile); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(s.signer.PassphraseFile, []byte(rand.Text()), 0o600); err != nil {
			return err
		}
	}
	ks, err := keystore.Open(s.signer)
	if err != nil {
		return err
	}
	defer ks.Close()
	for _, account := range s.chain.Accounts() {
		hexKey := []byte(hex.EncodeToString(crypto.FromECDSA(account.Key)))
		if _, err := ks.Import(ctx, hexKey); err != nil && !errors.Is(err, keystore.ErrKeyExists) {
			return fmt.Errorf("import dev account %s: %w", account.Address, err)
		}
	}
	return nil
}

// signerDatabase is how signerd reaches its database in the stack.
type signerDatabase struct {
	ownerURL, serveURL, serveRole string
	// checkpointKey is signerd's checkpoint key; checkpoints is the file
	// its audit checkpoints go to, for signerctl audit verify --checkpoints
	// with the public key in checkpointKey + ".pub".
	checkpointKey, checkpoints string
}

// signerDatabase sets signerd's database up as a deployment has it:
// devstack's superuser owns the tables and migrates, and signerd serves as
// a role of its own (PREFIX + "signer_serve", its password kept in the
// state directory) that can append to the audit log but never change it.
// It also gives signerd a checkpoint key, made by signerctl, and a
// checkpoint file; a database that is new this run starts a new file,
// since the old one anchors a log that is gone.
func (s *stack) signerDatabase(ctx context.Context) error {
	svc := services[serviceIndex("signer")]
	ownerURL, err := s.databaseURL(ctx, svc)
	if err != nil {
		return err
	}
	password, err := s.stateSecret("signer-db.password")
	if err != nil {
		return err
	}
	role := s.cfg.DatabasePrefix + "signer_serve"
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return err
	}
	// format() quotes the role and the password on the server: utility
	// statements take no parameters.
	query := `SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)`
	if exists {
		query = `SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)`
	}
	var stmt string
	if err := conn.QueryRow(ctx, query, role, password).Scan(&stmt); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("signer's serving role %s: %w", role, err)
	}
	u, err := url.Parse(ownerURL)
	if err != nil {
		return err
	}
	u.User = url.UserPassword(role, password)
	s.signerDB = signerDatabase{ownerURL: ownerURL, serveURL: u.String(), serveRole: role,
		checkpointKey: filepath.Join(s.cfg.StateDir, "signer-checkpoint.key"),
		checkpoints:   filepath.Join(s.cfg.StateDir, "signer-audit-checkpoints.jsonl")}

	if _, err := os.Stat(s.signerDB.checkpoints); err == nil && !s.earlier[svc.identity] {
		if err := os.Rename(s.signerDB.checkpoints, s.signerDB.checkpoints+".before-"+time.Now().UTC().Format("20060102T150405Z")); err != nil {
			return err
		}
	}
	if _, err := os.Stat(s.signerDB.checkpointKey); !errors.Is(err, fs.ErrNotExist) {
		return err // nil: made by an earlier run
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.cfg.BinDir, signerctl), "audit", "new-checkpoint-key", "--out", s.signerDB.checkpointKey)
	cmd.Stderr = s.out.writer(svc.identity)
	publicKey, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("signerctl audit new-checkpoint-key: %w", err)
	}
	return os.WriteFile(s.signerDB.checkpointKey+".pub", publicKey, 0o644)
}

// stateSecret is a random secret kept in the state directory under name,
// made on first use.
func (s *stack) stateSecret(name string) (string, error) {
	path := filepath.Join(s.cfg.StateDir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret := rand.Text()
		return secret, os.WriteFile(path, []byte(secret), 0o600)
	}
	return strings.TrimSpace(string(b)), err
}

// serviceEnv is the environment of one service in the stack.
func (s *stack) serviceEnv(ctx context.Context, i int, svc service) ([]string, error) {
	f := devcert.Files(s.certs, svc.identity)
	env := map[string]string{
		"LISTEN_ADDR":   s.internalAddr(i),
		"TLS_CA_FILE":   f.CA,
		"TLS_CERT_FILE": f.Cert,
		"TLS_KEY_FILE":  f.Key,
		"LOG_FORMAT":    "text",
	}
	if svc.database {
		u, err := s.databaseURL(ctx, svc)
		if err != nil {
			return nil, err
		}
		env["DATABASE_URL"] = u
	}
	if svc.identity == "signer" {
		env["POLICY_FILE"] = s.cfg.SignerPolicyFile
		env["KEY_BACKEND"] = "keystore"
		env["KEYSTORE_DIR"] = s.signer.Dir
		env["KEYSTORE_PASSPHRASE_FILE"] = s.signer.PassphraseFile
		// signerd serves as its serving role; only migrate gets the
		// owner (see migrate).
		env["DATABASE_URL"] = s.signerDB.serveURL
		env["CHECKPOINT_KEY_FILE"] = s.signerDB.checkpointKey
		env["CHECKPOINT_FILE"] = s.signerDB.checkpoints
	}
	if svc.identity == "txmanager" {
		env["CHAINS_FILE"] = s.chainsFile
		env["SIGNER_URL"] = "https://" + s.internalAddr(serviceIndex("signer"))
		env["MEVROUTER_URL"] = "https://" + s.internalAddr(serviceIndex("mevrouter"))
		env["NODE_ID"] = "devstack-txmanager"
	}
	if svc.identity == "mevrouter" {
		env["CHAINS_FILE"] = s.routesFile
		env["RELAY_KEY_FILE"] = s.relayKeyFile
	}
	if svc.identity == "ledger" {
		env["TXMANAGER_URL"] = "https://" + s.internalAddr(serviceIndex("txmanager"))
		env["CHAIN_RPC"] = s.ledgerEndpoints()
		// anvil finalizes nothing until 64 blocks are built on a block:
		// reconciliation pins a recent block instead, deeper than
		// txmanager's 2 confirmations (a transaction at or before the
		// pinned block is booked once txmanager confirms it). The scanner
		// follows the head (SCAN_DEPTH's default, 0).
		env["RECONCILE_DEPTH"] = "6"
	}
	if svc.identity == "gateway" {
		env["REDIS_URL"] = s.redisURL
		env["PUBLIC_ADDR"] = s.cfg.GatewayAddr
		env["TXMANAGER_URL"] = "https://" + s.internalAddr(serviceIndex("txmanager"))
		env["LEDGER_URL"] = "https://" + s.internalAddr(serviceIndex("ledger"))
		// Webhook receivers in development listen on this machine.
		env["WEBHOOK_ALLOW_INSECURE_URLS"] = "true"
		env["WEBHOOK_BACKOFF_BASE"] = "1s"
	}
	list := os.Environ()
	for k, v := range env {
		list = append(list, svc.prefix+k+"="+v)
	}
	return list, nil
}

// adminKeyFile holds the development tenant's admin API key.
func (s *stack) adminKeyFile() string { return filepath.Join(s.cfg.StateDir, "admin.key") }

// adminKey gives the development tenant "dev" anvil's accounts and an
// admin API key, once: the key is kept in .devstack/admin.key for the
// quick start (txctl and curl read it from there). A key file older than
// the gateway's database names a key that database never held: it is
// made again.
func (s *stack) adminKey(ctx context.Context) error {
	if _, err := os.Stat(s.adminKeyFile()); err == nil && s.earlier["gateway"] {
		return nil
	}
	i := serviceIndex("gateway")
	env, err := s.serviceEnv(ctx, i, services[i])
	if err != nil {
		return err
	}
	args := []string{"bootstrap", "--tenant", "dev", "--key-name", "devstack-admin"}
	for _, node := range []*anvil.Node{s.chain, s.second} {
		for _, a := range node.Accounts() {
			args = append(args, "--signer", fmt.Sprintf("%d:%s", node.ChainID(), a.Address.Hex()))
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.cfg.BinDir, services[i].binary), args...)
	cmd.Env = env
	cmd.Stderr = s.out.writer("gateway")
	token, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("gatewayd bootstrap: %w", err)
	}
	return os.WriteFile(s.adminKeyFile(), token, 0o600)
}

// serviceIndex is the position of identity in services.
func serviceIndex(identity string) int {
	for i, svc := range services {
		if svc.identity == identity {
			return i
		}
	}
	panic("devstack: no service " + identity)
}

func (s *stack) internalAddr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(s.cfg.BasePort+i)
}

func (s *stack) migrate(ctx context.Context) error {
	for i, svc := range services {
		if !svc.database {
			continue
		}
		env, err := s.serviceEnv(ctx, i, svc)
		if err != nil {
			return err
		}
		if svc.identity == "signer" {
			// The owner migrates, and grants the serving role what it
			// needs to serve.
			env = append(env, svc.prefix+"OWNER_DATABASE_URL="+s.signerDB.ownerURL, svc.prefix+"SERVE_ROLE="+s.signerDB.serveRole)
		}
		p, err := s.spawn(svc.identity, filepath.Join(s.cfg.BinDir, svc.binary), env, "migrate")
		if err != nil {
			return err
		}
		select {
		case <-p.done:
			if p.err != nil {
				return fmt.Errorf("%s migrate: %w", svc.binary, p.err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *stack) startServices(ctx context.Context) error {
	for i, svc := range services {
		client, err := s.healthClient(svc.identity)
		if err != nil {
			return err
		}
		env, err := s.serviceEnv(ctx, i, svc)
		if err != nil {
			return err
		}
		p, err := s.spawn(svc.identity, filepath.Join(s.cfg.BinDir, svc.binary), env)
		if err != nil {
			return err
		}
		go func() {
			<-p.done
			s.exited <- exit{svc.identity, p.err}
		}()
		healthURL := "https://" + s.internalAddr(i) + "/healthz"
		err = waitFor(ctx, p, func() error {
			resp, err := client.Get(healthURL)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s did not become healthy: %w", svc.identity, err)
		}
	}
	return nil
}

// healthClient checks a service's health over mTLS as devstack, and
// accepts only a listener that proves to be that service.
func (s *stack) healthClient(identity string) (*http.Client, error) {
	src, err := mtls.Load(devcert.Files(s.certs, Identity), mtls.Options{})
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: src.ClientConfig(identity)}}, nil
}

func (s *stack) printSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ntxfence is running. Ctrl-C stops everything devstack started.")
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "  gateway (public API)\thttp://%s\n", s.cfg.GatewayAddr)
	for i, svc := range services {
		fmt.Fprintf(tw, "  %s (internal, mTLS)\thttps://%s\n", svc.identity, s.internalAddr(i))
	}
	fmt.Fprintf(tw, "  anvil (chain %d, a block every %s, by the relay)\t%s\n", s.chain.ChainID(), s.cfg.BlockTime, s.chain.URL())
	fmt.Fprintf(tw, "  anvil (chain %d, a block every %s)\t%s\n", s.second.ChainID(), s.cfg.BlockTime, s.second.URL())
	fmt.Fprintf(tw, "  development relay (not a real relay)\t%s\n", s.relayURL)
	fmt.Fprintf(tw, "  PostgreSQL\t%s\n", config.MaskURL(s.adminURL))
	fmt.Fprintf(tw, "  Redis\t%s\n", s.redisURL)
	fmt.Fprintf(tw, "  certificates\t%s\n", s.certs)
	fmt.Fprintf(tw, "  signer audit checkpoints\t%s (public key in %s.pub)\n", s.signerDB.checkpoints, s.signerDB.checkpointKey)
	fmt.Fprintf(tw, "  admin API key (tenant dev)\t%s\n", s.adminKeyFile())
	fmt.Fprintf(tw, "  operator console\thttp://%s/console/\n", s.cfg.GatewayAddr)
	_ = tw.Flush()
	f := devcert.Files(s.certs, Identity)
	fmt.Fprintf(w, "\nTry:\n  curl http://%s/healthz\n  curl -H \"Authorization: Bearer $(cat %s)\" http://%s/api/v1/me\n  curl --cacert %s --cert %s --key %s https://%s/readyz\n\n",
		s.cfg.GatewayAddr, s.adminKeyFile(), s.cfg.GatewayAddr, f.CA, f.Cert, f.Key, s.internalAddr(serviceIndex("txmanager")))
}

// stop ends every process in reverse start order, then runs the cleanups.
func (s *stack) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop(15 * time.Second)
	}
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// waitFor polls check until it passes, the process dies, or a minute
// passes.
func waitFor(ctx context.Context, p *process, check func() error) error {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		case <-deadline.C:
			return fmt.Errorf("still failing after a minute: %w", err)
		case <-tick.C:
		}
	}
}

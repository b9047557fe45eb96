package signerd_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signerctl"
	"github.com/txfence/txfence/signer-zonec/signerd"
	"github.com/txfence/txfence/signer-zonec/signerd/devsignerd"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// deployedEnv is signerd's environment as a deployment has it: a database
// whose owner migrates (signerd migrate, twice) and whose serving role
// serves, a checkpoint key and file, the test PKI, the development policy
// and a keystore of the dev keys, which signerd-dev (devsignerd.Run) serves
// from.
func deployedEnv(t *testing.T) (pki string, db *signertest.Database, env map[string]string) {
	t.Helper()
	pki = servicetest.PKI(t)
	policyFile, err := filepath.Abs("../testdata/policy/development.json")
	if err != nil {
		t.Fatal(err)
	}
	db = signertest.NewDatabase(t)
	env = servicetest.Merge(servicetest.TLSEnv(prefix, pki, signerd.Spec.Identity), db.Env(prefix), signertest.CheckpointEnv(t, prefix),
		keystoreEnv(t), map[string]string{prefix + "POLICY_FILE": policyFile, prefix + "LOCK_MEMORY": "false"})
	servicetest.MigrateTwice(t, signerd.Run, env)
	return pki, db, env
}

// TestServeRefusesAPrivilegedDatabaseRole: signerd does not serve as the
// owner of its tables, which could switch the audit log's triggers off,
// and says how to set the roles up; a developer may allow it explicitly.
func TestServeRefusesAPrivilegedDatabaseRole(t *testing.T) {
	t.Parallel()
	_, db, env := deployedEnv(t)
	asOwner := servicetest.Merge(env, map[string]string{prefix + "DATABASE_URL": db.OwnerURL})
	_, err := servicetest.RunOnce(t, devsignerd.Run, nil, asOwner)
	for _, want := range []string{"owns audit_log", "TXFENCE_SIGNER_SERVE_ROLE", "TXFENCE_SIGNER_OWNER_DATABASE_URL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serving as the owner: %v; want a refusal saying %q", err, want)
		}
	}
	allowed := servicetest.Merge(asOwner, map[string]string{prefix + "ALLOW_PRIVILEGED_DATABASE_ROLE": "true"})
	svc := servicetest.Start(t, devsignerd.Run, nil, allowed, "internal")
	if !strings.Contains(svc.Logs(), "serving as a privileged database role") {
		t.Errorf("serving as the owner, allowed for development, without a warning:\n%s", svc.Logs())
	}
}

func TestServeRefusesWithoutACheckpointKey(t *testing.T) {
	t.Parallel()
	_, _, env := deployedEnv(t)
	delete(env, prefix+"CHECKPOINT_KEY_FILE")
	_, err := servicetest.RunOnce(t, devsignerd.Run, nil, env)
	if err == nil || !strings.Contains(err.Error(), "CHECKPOINT_KEY_FILE is required") {
		t.Errorf("serving without a checkpoint key: %v; want a refusal naming the setting", err)
	}
}

// TestCheckpointsAnchorTheAuditLog runs signerd as a process with a key
// made by signerctl: a checkpoint at start, one once enough
// records were appended, and one at shutdown, each in the file and in
// the log stream, and audit verify holds the log to them. Then the tables'
// owner cuts the log back and rewinds its head, which the database alone
// cannot show and the checkpoints do; and a checkpoint with a bad
// signature is named.
func TestCheckpointsAnchorTheAuditLog(t *testing.T) {
	t.Parallel()
	pki, db, env := deployedEnv(t)
	dir := t.TempDir()
	keyFile, file := filepath.Join(dir, "checkpoint.key"), filepath.Join(dir, "checkpoints.jsonl")
	out, err := signerctlRun(nil, "audit", "new-checkpoint-key", "--out", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	publicKey := strings.TrimSpace(out)
	if _, err := signerctlRun(nil, "audit", "new-checkpoint-key", "--out", keyFile); err == nil {
		t.Error("new-checkpoint-key overwrote an existing key")
	}
	env = servicetest.Merge(env, map[string]string{
		prefix + "CHECKPOINT_KEY_FILE": keyFile, prefix + "CHECKPOINT_FILE": file,
		// No checkpoint by time in this test: at start, after 3 records,
		// and at shutdown.
		prefix + "CHECKPOINT_INTERVAL": "1h", prefix + "CHECKPOINT_RECORDS": "3",
	})
	bin := servicetest.Build(t, "github.com/txfence/txfence/signer-zonec/cmd/signerd-dev")
	proc := servicetest.StartProcess(t, bin, nil, env, "internal")
	client := servicetest.Client(t, pki, "txmanager", signerd.Spec.Identity)
	signAt := func(nonce int) {
		t.Helper()
		if code, outcome := sign(t, client, proc.URL("internal"), transferJSON(fmt.Sprintf("tx-%d", nonce), nonce, "1", "30000000000")); code != 200 || outcome != "signed" {
			t.Fatalf("sign at nonce %d: %d %s", nonce, code, outcome)
		}
	}
	for nonce := range 3 {
		signAt(nonce)
	}
	waitForCheckpoint(t, file, 3)
	signAt(3) // one record: below CHECKPOINT_RECORDS, anchored only at shutdown
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("signerd at SIGTERM: %v\n%s", err, proc.Logs())
	}

	cps := readCheckpointFile(t, file)
	if len(cps) != 3 || cps[0].Seq != 0 || cps[1].Seq != 3 || cps[2].Seq != 4 {
		t.Fatalf("checkpoints at %v; want 0 (start), 3 (three records) and 4 (shutdown)", seqs(cps))
	}
	logFile := filepath.Join(dir, "log-checkpoints.jsonl")
	var logged []string
	for line := range strings.SplitSeq(proc.Logs(), "\n") {
		if strings.Contains(line, `"msg":"audit checkpoint"`) {
			logged = append(logged, line)
		}
	}
	if err := os.WriteFile(logFile, []byte(strings.Join(logged, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	verify := func(args ...string) (string, error) {
		return signerctlRun(env, append([]string{"audit", "verify"}, args...)...)
	}
	for _, sink := range []string{file, logFile} {
		out, err := verify("--checkpoints", sink, "--public-key", publicKey)
		if err != nil || !strings.Contains(out, "4 records") || !strings.Contains(out, "held to 3 checkpoints") {
			t.Errorf("verify against %s: %v\n%s", filepath.Base(sink), err, out)
		}
	}

	// A checkpoint whose signature does not verify is named, by its line.
	forged := filepath.Join(dir, "forged.jsonl")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(raw), "\n", 2)
	lines[0] = strings.Replace(lines[0], `"seq":0`, `"seq":1`, 1)
	if err := os.WriteFile(forged, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verify("--checkpoints", forged, "--public-key", publicKey); err == nil ||
		!strings.Contains(err.Error(), "checkpoint on line 1 (seq 1") || !strings.Contains(err.Error(), "signature does not verify") {
		t.Errorf("verify with an edited checkpoint: %v; want line 1 named for its signature", err)
	}

	// The owner cuts the last two records, with their signatures, and
	// rewinds the head: the database agrees with itself.
	owner := db.OwnerPool(t)
	for _, stmt := range []string{
		`ALTER TABLE audit_log DISABLE TRIGGER USER`, `ALTER TABLE signature DISABLE TRIGGER USER`, `ALTER TABLE audit_head DISABLE TRIGGER USER`,
		`DELETE FROM signature WHERE audit_seq > 2`, `DELETE FROM audit_log WHERE seq > 2`,
		`UPDATE audit_head SET (seq, hash) = (SELECT seq, hash FROM audit_log WHERE seq = 2)`,
		`ALTER TABLE audit_log ENABLE TRIGGER USER`, `ALTER TABLE signature ENABLE TRIGGER USER`, `ALTER TABLE audit_head ENABLE TRIGGER USER`,
	} {
		if _, err := owner.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if out, err := verify(); err != nil {
		t.Fatalf("without checkpoints the cut log verifies (that is the attack): %v\n%s", err, out)
	}
	_, err = verify("--checkpoints", file, "--public-key", publicKey)
	for _, want := range []string{"BROKEN", "checkpoint on line 2 (seq 3", "records 3 to 3", "checkpoint on line 3 (seq 4", "records 3 to 4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("verify the cut log against its checkpoints: %v; want it to say %q", err, want)
		}
	}
}

// signerctlRun runs signerctl with env and returns what it printed.
func signerctlRun(env map[string]string, args ...string) (string, error) {
	var out bytes.Buffer
	err := signerctl.Run(context.Background(), args, func(k string) string { return env[k] }, nil, &out)
	return out.String(), err
}

// waitForCheckpoint polls the file until it holds a checkpoint at seq or
// beyond.
func waitForCheckpoint(t *testing.T, file string, seq uint64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(file); err == nil {
			for _, cp := range readCheckpointFile(t, file) {
				if cp.Seq >= seq {
					return
				}
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no checkpoint at %d or beyond in %s within 30s", seq, file)
		case <-tick.C:
		}
	}
}

func readCheckpointFile(t *testing.T, file string) []signer.Checkpoint {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cps []signer.Checkpoint
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cp, err := signer.ParseCheckpoint(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cps = append(cps, cp)
	}
	return cps
}

func seqs(cps []signer.Checkpoint) []uint64 {
	var out []uint64
	for _, cp := range cps {
		out = append(out, cp.Seq)
	}
	return out
}

package signertest

import (
	"os"
	"path/filepath"
	"testing"

	signer "github.com/txfence/txfence/signer-zonec"
)

// CheckpointEnv is signerd's checkpoint settings for t: a new checkpoint
// key and a checkpoint file, both in t's temporary directory.
func CheckpointEnv(t testing.TB, prefix string) map[string]string {
	t.Helper()
	key, data, err := signer.GenerateCheckpointKey()
	if err != nil {
		t.Fatal(err)
	}
	key.Destroy()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(keyFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		prefix + "CHECKPOINT_KEY_FILE": keyFile,
		prefix + "CHECKPOINT_FILE":     filepath.Join(dir, "audit-checkpoints.jsonl"),
	}
}

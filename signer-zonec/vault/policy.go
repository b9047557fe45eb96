package vault

import (
	"fmt"
	"strings"
)

// ServePolicy is the least Vault ACL policy (HCL) signerd's serving token
// needs with cfg: list the key secrets, read them, and in mode transit
// decrypt with the wrapping key. It cannot write or delete a key, nor
// encrypt with the transit key. The token also needs Vault's default
// policy, which lets it look itself up (Key's health check) and renew
// itself.
func ServePolicy(cfg Config) string {
	cfg = cfg.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "# signerd serve (%s mode)\n", cfg.Mode)
	fmt.Fprintf(&b, "path %q {\n  capabilities = [\"list\"]\n}\n", cfg.KVMount+"/metadata/"+cfg.KVPrefix+"/")
	fmt.Fprintf(&b, "path %q {\n  capabilities = [\"read\"]\n}\n", cfg.KVMount+"/data/"+cfg.KVPrefix+"/*")
	if cfg.Mode == ModeTransit {
		fmt.Fprintf(&b, "path %q {\n  capabilities = [\"update\"]\n}\n", cfg.TransitMount+"/decrypt/"+cfg.TransitKey)
	}
	return b.String()
}

// ManagePolicy is the least policy for `signerd keys new|import|list`
// with cfg: create key secrets (never overwrite them), list them and read
// their metadata (versions and times, to refuse an address already
// stored), and in mode transit encrypt with the wrapping key. It cannot
// read a stored key back, nor decrypt.
func ManagePolicy(cfg Config) string {
	cfg = cfg.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "# signerd keys (%s mode)\n", cfg.Mode)
	fmt.Fprintf(&b, "path %q {\n  capabilities = [\"list\"]\n}\n", cfg.KVMount+"/metadata/"+cfg.KVPrefix+"/")
	fmt.Fprintf(&b, "path %q {\n  capabilities = [\"read\"]\n}\n", cfg.KVMount+"/metadata/"+cfg.KVPrefix+"/*")
	fmt.Fprintf(&b, "path %q {\n  capabilities = [\"create\"]\n}\n", cfg.KVMount+"/data/"+cfg.KVPrefix+"/*")
	if cfg.Mode == ModeTransit {
		fmt.Fprintf(&b, "path %q {\n  capabilities = [\"update\"]\n}\n", cfg.TransitMount+"/encrypt/"+cfg.TransitKey)
	}
	return b.String()
}

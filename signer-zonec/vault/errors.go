package vault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/vault/api"
)

// The kinds of failure the backend reports, for errors.Is. Every one of
// them means no key and so no signature.
var (
	// ErrSealed: Vault is sealed (or not initialized) and serves nothing.
	ErrSealed = errors.New("vault is sealed")
	// ErrUnreachable: no answer from Vault (connection refused, timeout,
	// TLS failure).
	ErrUnreachable = errors.New("vault is unreachable")
	// ErrDenied: Vault refused signerd's token (invalid, expired or
	// revoked) or its policy does not grant the path.
	ErrDenied = errors.New("vault denied permission")
	// ErrKeyExists: creating or importing a key whose address is already
	// stored; keys are never overwritten.
	ErrKeyExists = errors.New("key already stored in vault")
)

// classify turns an error from vault/api into one that names what failed,
// where, and why, wrapping one of the errors above where it applies. op
// says what signerd was doing ("read key 0x…").
func (b *Backend) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	addr := b.cfg.Addr
	var re *api.ResponseError
	if errors.As(err, &re) {
		detail := vaultMessages(re.Errors)
		switch {
		case re.StatusCode == 503 && slices.ContainsFunc(re.Errors, func(s string) bool { return strings.Contains(strings.ToLower(s), "sealed") }):
			return fmt.Errorf("%s: %w (vault at %s): no key is served until it is unsealed", op, ErrSealed, addr)
		case re.StatusCode == 403:
			return fmt.Errorf("%s: %w (vault at %s: %s): signerd's token is invalid, expired or revoked, or its policy does not grant this path", op, ErrDenied, addr, detail)
		case re.StatusCode == 400 && strings.Contains(detail, "check-and-set"):
			return fmt.Errorf("%s: %w", op, ErrKeyExists)
		}
		return fmt.Errorf("%s: vault at %s answered %d: %s", op, addr, re.StatusCode, detail)
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w (vault at %s): %v", op, ErrUnreachable, addr, err)
	}
	return fmt.Errorf("%s: vault at %s: %w", op, addr, err)
}

var multiErrorHead = regexp.MustCompile(`^\d+ errors? occurred: \* `)

// vaultMessages flattens Vault's error strings ("1 error occurred:\n\t*
// permission denied\n\n") to one line ("permission denied").
func vaultMessages(msgs []string) string {
	var out []string
	for _, m := range msgs {
		m = strings.Join(strings.Fields(m), " ")
		m = multiErrorHead.ReplaceAllString(m, "")
		out = append(out, strings.ReplaceAll(m, " * ", "; "))
	}
	return strings.Join(out, "; ")
}

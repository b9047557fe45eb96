// Package transitid is the syntax of a transit id, the one string that
// ties the two transactions of a transfer between chains together: the
// client names it in both transactions' metadata, txmanager carries it in
// their INIT events with the tenant's namespace, and the ledger pairs the
// ends by it. Each service checks it with the same rule.
package transitid

// MaxLen bounds a transit id as a client names it; MaxNamespaceLen a
// namespace (a UUID: the gateway names the tenant).
const (
	MaxLen          = 128
	MaxNamespaceLen = 36
)

// Valid reports whether id is a transit id a client may name: 1 to MaxLen
// characters of [A-Za-z0-9._:-].
func Valid(id string) bool { return valid(id, MaxLen) }

// ValidNamespace reports whether ns is a well-formed namespace: 1 to
// MaxNamespaceLen characters of [A-Za-z0-9._:-].
func ValidNamespace(ns string) bool { return valid(ns, MaxNamespaceLen) }

func valid(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

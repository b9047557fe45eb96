// Package gatewaytest holds the gateway's test helpers that need no other
// service. The gateway's API in front of real txmanager and ledger APIs
// is deploy/integration/gatewaystack: it runs three services, so it lives
// where every service module may be required.
package gatewaytest

// WrongSecret is token with one character of its secret changed: not the
// last, whose low bits base64 ignores, so that the secret really differs.
func WrongSecret(token string) string {
	b := []byte(token)
	i := len(b) - 5
	b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
	return string(b)
}

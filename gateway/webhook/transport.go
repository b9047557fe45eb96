package webhook

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/txfence/txfence/gateway"
)

// newHTTPClient is the client deliveries go out with. It follows no
// redirect (a 3xx is a failed attempt: a signed delivery goes where the
// tenant said, and nowhere else) and uses no proxy from the environment.
// Unless insecure URLs are allowed, it refuses to connect to an address
// that is not public, checked on the address actually dialled, so that a
// host name resolving to the deployment's own network (or rebinding to it
// after the URL was checked) gets nowhere.
func newHTTPClient(allowInsecure bool, workers int) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowInsecure {
		dialer.Control = refuseNonPublic
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    10 * time.Second,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           4 * max(workers, 16),
			MaxIdleConnsPerHost:    max(workers, 2),
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refuseNonPublic is a net.Dialer Control function: it runs after name
// resolution, on the very address about to be connected.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: unexpected address %q: %w", address, err)
	}
	if !gateway.PublicIP(ap.Addr()) {
		return fmt.Errorf("webhook: refusing to connect to %s: not a public address", ap.Addr())
	}
	return nil
}

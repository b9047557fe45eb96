package gateway_test

import (
	"net/netip"
	"testing"

	"github.com/txfence/txfence/gateway"
)

// TestPublicIP: addresses a delivery may connect to in production.
func TestPublicIP(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700::1111": true, "::ffff:8.8.8.8": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "255.255.255.255": false, "224.0.0.1": false, "::1": false, "::": false,
		"fe80::1": false, "fc00::1": false, "::ffff:127.0.0.1": false, "64:ff9b::a00:1": false, "192.0.2.1": false,
		"198.18.0.1": false, "2001:db8::1": false,
		// The rest of IANA's special-purpose registries: what no webhook
		// receiver lives at, or what can embed an address of ours.
		"192.0.0.9": false, "198.51.100.7": false, "203.0.113.9": false, "192.88.99.1": false, "240.0.0.1": false,
		"64:ff9b:1::a00:1": false, "100::1": false, "100:0:0:1::1": false, "2001::1": false, "2001:2::1": false,
		"2001:10::1": false, "2001:20::1": false, "2002:a00:1::1": false, "3fff::1": false, "3fff:fff::1": false,
		"5f00::1": false, "fec0::1": false, "ff02::1": false,
		"2001:4860:4860::8888": true, "2a00:1450:4001::1": true, "4000::1": false,
	} {
		if got := gateway.PublicIP(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicIP(%s) = %v, want %v", addr, got, want)
		}
	}
}

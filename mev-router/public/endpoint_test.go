package public_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/public"
)

func TestEndpointsFromConfiguration(t *testing.T) {
	t.Parallel()
	var es public.Endpoints
	err := es.UnmarshalText([]byte(" infura=https://mainnet.example/v3/SECRETKEY , http://10.0.0.5:8545 ,ws=wss://node.example/ws"))
	if err != nil {
		t.Fatal(err)
	}
	want := public.Endpoints{
		{Name: "infura", URL: "https://mainnet.example/v3/SECRETKEY"},
		{Name: "10.0.0.5", URL: "http://10.0.0.5:8545"},
		{Name: "ws", URL: "wss://node.example/ws"},
	}
	if diff := cmp.Diff(want, es); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	// The dump shows no path, where API keys live.
	if s := es.String(); strings.Contains(s, "SECRETKEY") || !strings.Contains(s, "infura=https://mainnet.example") {
		t.Errorf("String() = %q", s)
	}

	for _, bad := range []string{"a=ftp://x", "a=http://x,a=http://y", "bad name=http://x", "x=notaurl", "=http://"} {
		var es public.Endpoints
		err := es.UnmarshalText([]byte(bad))
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: error quotes a secret: %v", bad, err)
		}
	}
	// A bad URL with a key in it is reported without the key.
	err = es.UnmarshalText([]byte("p=gopher://host.example/v3/SECRETKEY"))
	if err == nil || strings.Contains(err.Error(), "SECRETKEY") {
		t.Errorf("bad endpoint error %v", err)
	}
}

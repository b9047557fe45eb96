package rpcpool_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/rpcpool"
)

func TestEndpointsAsAChainsFileGivesThem(t *testing.T) {
	t.Parallel()
	var got []rpcpool.Endpoint
	err := json.Unmarshal([]byte(`["http://127.0.0.1:8545",
		{"name": "paid", "url": "https://eth.example/v2/SECRET", "weight": 3, "rps": 25,
		 "credits": {"units": 1000, "period": "24h", "default": 20, "cost": {"eth_getLogs": 75}}}]`), &got)
	if err != nil {
		t.Fatal(err)
	}
	want := []rpcpool.Endpoint{
		{Name: "127.0.0.1:8545", URL: "http://127.0.0.1:8545"},
		{Name: "paid", URL: "https://eth.example/v2/SECRET", Weight: 3, RPS: 25,
			Credits: &rpcpool.Credits{Units: 1000, Period: 24 * time.Hour, Default: 20, Cost: map[string]int64{"eth_getLogs": 75}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestBadEndpointsAreRefusedWithoutTheirSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`"ftp://x"`, "want http(s)://"},
		{`"http://"`, "with a host"},
		{`{"url": "https://eth.example/v2/SECRET", "weight": -1}`, "eth.example: weight and rps"},
		{`{"url": "https://eth.example/v2/SECRET", "credits": {"units": 5, "period": "soon"}}`, "eth.example: credits.period"},
		{`{"url": "https://eth.example/v2/SECRET", "credits": {"units": 0, "period": "1h"}}`, "positive units and period"},
		{`{"url": "https://eth.example/v2/SECRET", "credits": {"units": 5, "period": "1h", "cost": {"eth_call": -1}}}`, "credits.cost.eth_call"},
		{`{"url": "https://eth.example/v2/SECRET", "weigth": 2}`, "unknown field"},
		{`7`, "a URL or {name, url"},
	} {
		var e rpcpool.Endpoint
		err := json.Unmarshal([]byte(tc.in), &e)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v, want an error saying %q without the URL's secret", tc.in, err, tc.want)
		}
	}
}

// FuzzEndpoint: any input is read or refused without a panic, and what is
// read writes out and reads back the same.
func FuzzEndpoint(f *testing.F) {
	for _, seed := range []string{`"http://127.0.0.1:8545"`, `{"name": "a", "url": "wss://x/ws", "weight": 2, "rps": 1.5}`,
		`{"url": "https://x", "credits": {"units": 10, "period": "1h", "cost": {"eth_call": 2}}}`, `[]`, `""`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var e rpcpool.Endpoint
		if json.Unmarshal([]byte(in), &e) != nil {
			return
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var again rpcpool.Endpoint
		if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("%s read as %+v, written as %s, read back as %+v (%v)", in, e, b, again, err)
		}
	})
}

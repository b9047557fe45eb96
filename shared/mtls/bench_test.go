package mtls_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/testinfra/devcert"
)

// BenchmarkHandshake measures full mutual-TLS 1.3 handshakes (a new
// connection each time, certificates verified both ways and the files
// checked for changes): the cost a caller pays without connection reuse.
func BenchmarkHandshake(b *testing.B) {
	url, client := benchPair(b, &http.Transport{DisableKeepAlives: true})
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, client, url)
	}
}

// BenchmarkRequestOverMTLS measures requests on kept-alive mTLS
// connections, the steady state between services.
func BenchmarkRequestOverMTLS(b *testing.B) {
	url, client := benchPair(b, &http.Transport{MaxIdleConnsPerHost: 64})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchGet(b, client, url)
		}
	})
}

func benchPair(b *testing.B, tr *http.Transport) (string, *http.Client) {
	b.Helper()
	ca, err := devcert.NewCA("bench CA", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for _, svc := range []string{"signer", "txmanager"} {
		leaf, err := ca.Issue(svc, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		f := devcert.Files(dir, svc)
		mustWriteB(b, f.CA, ca.CertPEM())
		mustWriteB(b, f.Cert, leaf.CertPEM)
		mustWriteB(b, f.Key, leaf.KeyPEM)
	}
	server, err := mtls.Load(devcert.Files(dir, "signer"), mtls.Options{})
	if err != nil {
		b.Fatal(err)
	}
	client, err := mtls.Load(devcert.Files(dir, "txmanager"), mtls.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server.ServerConfig())
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mtls.Allow("txmanager")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	tr.TLSClientConfig = client.ClientConfig("signer")
	return "https://" + ln.Addr().String(), &http.Client{Transport: tr}
}

func benchGet(b *testing.B, c *http.Client, url string) {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatal(resp.StatusCode)
	}
}

func mustWriteB(b *testing.B, file string, data []byte) {
	b.Helper()
	if err := writeFile(file, data); err != nil {
		b.Fatal(err)
	}
}

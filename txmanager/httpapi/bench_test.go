package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/servicetest"
)

// BenchmarkCreate prints accepted creates per second for one signer
// through the internal API over mutual TLS (each a durable INIT row and
// its event), from 32 concurrent clients, and the latency percentiles,
// with the garbage collector set as txmanagerd sets it.
func BenchmarkCreate(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	daemon.TuneGC(os.Getenv)
	a := startServer(b, false, oneSigner)
	client := servicetest.Client(b, a.pki, "gateway", "txmanager")
	var n atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	b.SetParallelism(16) // 32 clients on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			body := createBody(fmt.Sprintf("bench-%d", n.Add(1)), "1")
			start := time.Now()
			resp, err := client.Post(a.url+"/internal/v1/tx", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			// Read to the end: an unread body costs the connection, and the
			// next request a TLS handshake.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("create: %d", resp.StatusCode)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies))/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
}

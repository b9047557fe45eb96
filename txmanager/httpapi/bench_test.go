package httpapi_test

import (
	"context"
	"encoding/json"
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
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// BenchmarkCreate prints accepted creates per second for one signer
// through the internal API over mutual TLS (each a durable INIT row and
// its event), from 32 concurrent clients, and the latency percentiles,
// with the garbage collector set as txmanagerd sets it.
func BenchmarkCreate(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	daemon.TuneGC(os.Getenv)
	a := startServer(b, false, oneSigner)
	client := servicetest.Client(b, a.PKI, "gateway", "txmanager")
	var n atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	b.SetParallelism(16) // 32 clients on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			if !benchCreate(b, client, a.URL, n.Add(1)) {
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

// BenchmarkCreateBesideFeedPolls prints accepted creates per second, as
// BenchmarkCreate, beside 0 and then 200 long polls of the feed: "idle"
// polls wait past the head (an open stream with nothing new for it, on
// the feed watch: no database work), "following" polls read each new
// event as an event stream does (each new head wakes every one of them
// into a read of the feed). Compare the rates within one run.
func BenchmarkCreateBesideFeedPolls(b *testing.B) {
	for _, shape := range []struct {
		name      string
		polls     int
		following bool
	}{{"polls=0", 0, false}, {"idle_polls=200", 200, false}, {"following_polls=200", 200, true}} {
		b.Run(shape.name, func(b *testing.B) {
			a := startServer(b, false, oneSigner)
			client := servicetest.Client(b, a.PKI, "gateway", "txmanager")
			// One connection per poll, kept: the handshakes are not what
			// is measured.
			if tr, ok := client.Transport.(*http.Transport); ok {
				tr = tr.Clone()
				tr.MaxIdleConnsPerHost = shape.polls + 64
				client.Transport = tr
			}
			ctx, stop := context.WithCancel(context.Background())
			var waiting, ready sync.WaitGroup
			for range shape.polls {
				ready.Add(1)
				waiting.Go(func() {
					after := uint64(1_000_000_000)
					if shape.following {
						after = 0
					}
					first := true
					for ctx.Err() == nil {
						wait := 30
						if first {
							wait = 0 // connect first, then wait
						}
						req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/internal/v1/events?after=%d&wait=%d&limit=1000", a.URL, after, wait), nil)
						resp, err := client.Do(req)
						if first {
							ready.Done()
							first = false
						}
						if err != nil {
							return
						}
						var page struct {
							Events []struct {
								Seq uint64 `json:"seq"`
							} `json:"events"`
						}
						_ = json.NewDecoder(resp.Body).Decode(&page)
						resp.Body.Close()
						if shape.following && len(page.Events) > 0 {
							after = page.Events[len(page.Events)-1].Seq
						}
					}
				})
			}
			ready.Wait()
			var n atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !benchCreate(b, client, a.URL, n.Add(1)) {
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "creates/s")
			stop()
			waiting.Wait()
			client.CloseIdleConnections()
		})
	}
}

// benchCreate posts the create of request n and reports whether it was
// accepted.
func benchCreate(b *testing.B, client *http.Client, url string, n int64) bool {
	resp, err := client.Post(url+"/internal/v1/tx", "application/json", strings.NewReader(txmanagertest.TransferBody(fmt.Sprintf("bench-%d", n), "1")))
	if err != nil {
		b.Error(err)
		return false
	}
	// Read to the end: an unread body costs the connection, and the next
	// request a TLS handshake.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Errorf("create: %d", resp.StatusCode)
		return false
	}
	return true
}

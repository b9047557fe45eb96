package api_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/gatewaytest"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/redistest"
)

// BenchmarkAcceptThroughGateway measures SYSTEM.md's first target: intents
// accepted per second for one signer through the gateway (key check, rate
// limit in Redis, validation against the spec, txmanager's durable INIT
// over mutual TLS), and the latency at full load and at half of it.
//
// The services run in this process, with the garbage collector set as
// their daemons set it (daemon.TuneGC).
//
// Full load is 32 clients sending back to back; half load sends at half
// the full-load rate on a fixed schedule (an open loop, so a slow answer
// does not slow the senders and hide its own latency).
func BenchmarkAcceptThroughGateway(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	daemon.TuneGC(os.Getenv)
	opts, err := redis.ParseURL(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { rdb.Close() })
	limiter, err := ratelimit.New(rdb, ratelimit.Options{Prefix: fmt.Sprintf("txfence:bench:%d:", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	g := gatewaytest.Start(b, gatewaytest.Options{Unchecked: true, Limits: limiter, Limit: ratelimit.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	var seq atomic.Int64
	send := func() (time.Duration, error) {
		req, _ := http.NewRequest("POST", g.URL+"/api/v1/tx", strings.NewReader(gatewaytest.Transfer(gatewaytest.SignerA, "1")))
		req.Header.Set("Authorization", "Bearer "+g.Acme)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-"+strconv.FormatInt(seq.Add(1), 10))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("create: %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}

	// Full load.
	var mu sync.Mutex
	var full []time.Duration
	b.SetParallelism(16) // 32 clients on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			d, err := send()
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, d)
		}
		mu.Lock()
		full = append(full, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	rate := float64(len(full)) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "accepted/s")
	b.ReportMetric(percentile(full, 0.50), "p50_full_ms")
	b.ReportMetric(percentile(full, 0.99), "p99_full_ms")

	// Half load, for two seconds.
	half := rate / 2
	n := int(half * 2)
	if n < 50 {
		return // too few for percentiles: a short -benchtime run
	}
	interval := time.Duration(float64(time.Second) / half)
	var halfLat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			<-time.After(wait) // the open loop's schedule, not a wait for a result
		}
		wg.Go(func() {
			d, err := send()
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			halfLat = append(halfLat, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.ReportMetric(percentile(halfLat, 0.50), "p50_half_ms")
	b.ReportMetric(percentile(halfLat, 0.99), "p99_half_ms")
}

func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
}

package httpapi_test

import (
	"bufio"
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

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/testinfra/redistest"
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
	g := gatewaystack.Start(b, gatewaystack.Options{Unchecked: true, Limits: limiter, Limit: ratelimit.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	var seq atomic.Int64
	send := func() (time.Duration, error) {
		start := time.Now()
		err := createForBench(client, g, "bench-"+strconv.FormatInt(seq.Add(1), 10))
		return time.Since(start), err
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

// BenchmarkAcceptBesideStreams measures what open event streams cost the
// pipeline: intents accepted per second through the gateway with no
// stream open and beside 200 streams, in alternating phases. It runs twice: with 200 streams of another
// tenant, which see none of the events and only wait, and with 200
// streams of the sending tenant, which carry every event. The ratios are
// the figures: 1.0 means the streams cost nothing.
func BenchmarkAcceptBesideStreams(b *testing.B) {
	for _, follow := range []bool{false, true} {
		name := "waiting"
		if follow {
			name = "following"
		}
		b.Run(name, func(b *testing.B) {
			g := gatewaystack.Start(b, gatewaystack.Options{Unchecked: true, StreamsPerKey: 1000, StreamsPerTenant: 1000})
			key := g.Globex
			if follow {
				key = g.Acme
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
			var seq atomic.Int64
			accept := func(n int) time.Duration {
				var next atomic.Int64
				start := time.Now()
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						for next.Add(1) <= int64(n) {
							if err := createForBench(client, g, "streams-"+strconv.FormatInt(seq.Add(1), 10)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}
			// Three rounds of a quiet phase and a phase beside the streams,
			// so that a table growing over the run and the machine's drift
			// weigh on both alike.
			const rounds = 3
			n := max(b.N/rounds, 200)
			var quietTime, besideTime time.Duration
			var carried int64
			b.ResetTimer()
			for range rounds {
				quietTime += accept(n)
				received, stop := openBenchStreams(b, g, key, 200)
				besideTime += accept(n)
				if follow { // every stream carries every event, late or not
					for deadline := time.Now().Add(30 * time.Second); received.Load() < int64(200*n) && time.Now().Before(deadline); {
						<-time.After(10 * time.Millisecond)
					}
					if received.Load() < int64(200*n) {
						b.Errorf("the 200 streams carried %d events, want at least %d: they did not follow", received.Load(), 200*n)
					}
				}
				stop()
				carried += received.Load()
			}
			b.StopTimer()
			quiet := float64(rounds*n) / quietTime.Seconds()
			beside := float64(rounds*n) / besideTime.Seconds()
			b.ReportMetric(quiet, "accepted/s_quiet")
			b.ReportMetric(beside, "accepted/s_200_streams")
			b.ReportMetric(beside/quiet, "ratio")
			b.ReportMetric(float64(carried)/200, "events/stream")
		})
	}
}

// createForBench creates one transfer from signer A through g.
func createForBench(client *http.Client, g *gatewaystack.Gateway, idempotencyKey string) error {
	req, _ := http.NewRequest("POST", g.URL+"/api/v1/tx", strings.NewReader(gatewaystack.Transfer(gatewaystack.SignerA, "1")))
	req.Header.Set("Authorization", "Bearer "+g.Acme)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create: %d", resp.StatusCode)
	}
	return nil
}

// openBenchStreams opens n event streams with key, returns once each has
// answered, and counts the events they carry; stop closes them.
func openBenchStreams(b *testing.B, g *gatewaystack.Gateway, key string, n int) (received *atomic.Int64, stop func()) {
	received = new(atomic.Int64)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var open, done sync.WaitGroup
	var bodies []io.Closer
	var mu sync.Mutex
	for range n {
		open.Add(1)
		done.Go(func() {
			req, _ := http.NewRequest("GET", g.URL+"/api/v1/events", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				open.Done()
				return
			}
			mu.Lock()
			bodies = append(bodies, resp.Body)
			mu.Unlock()
			open.Done()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("open a stream: %d", resp.StatusCode)
				return
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					received.Add(1)
				}
			}
		})
	}
	open.Wait()
	return received, func() {
		mu.Lock()
		for _, body := range bodies {
			body.Close()
		}
		mu.Unlock()
		done.Wait()
	}
}

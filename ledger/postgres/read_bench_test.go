package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
)

// BenchmarkBalanceRead prints the latency (p50, p99) of reads of a hot
// wallet from 4 and from 16 concurrent readers (on GOMAXPROCS cores,
// rounded to a multiple of them), on a ledger of 1,000,000 entries:
// 20,000 journals of 50 entries, half of them the hot wallet's (500,000),
// the other half spread over 1,000 counterparties, ten journals a block
// over 2,000 blocks. It reads the current balance, balances as of a recent
// block (50 journals after it: backwards from the current balance), an old
// one (500 journals up to it: forwards over them) and one in the middle
// (10,000 journals either side: over the wallet's own 250,000 entries up
// to it), and statement pages deep in the history of the wallet (2,000
// movements, a block's journals each, of 250 entries) and of a
// counterparty (about 500 movements of one entry, the most a page of 100
// crosses). Seeding is timed too (seed-s).
func BenchmarkBalanceRead(b *testing.B) {
	const (
		journals = 20_000
		pairs    = 25 // wallet entries a journal, and as many counterparty ones
		perBlock = 10
		blocks   = journals / perBlock
	)
	s, pool := books(b)
	ctx := context.Background()
	began := time.Now()
	seed(b, pool, "bench-", journals, pairs, 1000, 1, perBlock)
	seeded := time.Since(began)
	// What autovacuum does for a ledger that has run a while: statistics
	// for the planner, and the visibility map for index-only scans.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE account, journal, entry, balance, movement`); err != nil {
		b.Fatal(err)
	}
	var entries, versions int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM entry), (SELECT count(*) FROM movement)`).Scan(&entries, &versions); err != nil || entries != journals*pairs*2 {
		b.Fatalf("seeded %d entries (%v), want %d", entries, err, journals*pairs*2)
	}
	b.Logf("seeded %d entries in %d movements in %s (and vacuumed in %s)", entries, versions, seeded.Round(time.Millisecond), (time.Since(began) - seeded).Round(time.Millisecond))
	id := accountID(b, pool, acct(ledger.Wallet, ledger.Native, hot))
	cp := accountID(b, pool, acct(ledger.Counterparty, ledger.Native, common.BigToAddress(big.NewInt(7))))
	// 80% into each statement; any balance to start from: the cost is the
	// same.
	deep := func(id int64) ledger.StatementPosition {
		pos := ledger.StatementPosition{Balance: big.NewInt(1)}
		if err := pool.QueryRow(ctx, `
			SELECT version, first_entry_id FROM movement WHERE account_id = $1
			ORDER BY version OFFSET (SELECT count(*) * 4 / 5 FROM movement WHERE account_id = $1) LIMIT 1`, id).Scan(&pos.Version, &pos.EntryID); err != nil {
			b.Fatal(err)
		}
		return pos
	}
	deepWallet, deepCounterparty := deep(id), deep(cp)

	for _, c := range []struct {
		name string
		read func() error
	}{
		{"current", func() error { _, err := s.Account(ctx, id, nil); return err }},
		{"at_block=head-5", func() error { _, err := s.Account(ctx, id, new(uint64(blocks-5))); return err }},
		{"at_block=old", func() error { _, err := s.Account(ctx, id, new(uint64(blocks/40))); return err }},
		{"at_block=middle", func() error { _, err := s.Account(ctx, id, new(uint64(blocks/2))); return err }},
		{"statement_page=100", func() error { _, err := s.Statement(ctx, id, deepWallet, 101); return err }},
		{"statement_page=100,counterparty", func() error { _, err := s.Statement(ctx, cp, deepCounterparty, 101); return err }},
	} {
		for _, readers := range []int{4, 16} {
			b.Run(fmt.Sprintf("%s/readers=%d", c.name, readers), func(b *testing.B) {
				var mu sync.Mutex
				var all []time.Duration
				b.SetParallelism(max(readers/runtime.GOMAXPROCS(0), 1))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						t0 := time.Now()
						if err := c.read(); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				if len(all) == 0 {
					return
				}
				slices.Sort(all)
				ms := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / float64(time.Millisecond) }
				b.ReportMetric(ms(0.50), "p50-ms")
				b.ReportMetric(ms(0.99), "p99-ms")
				b.ReportMetric(seeded.Seconds(), "seed-s")
			})
		}
	}
}

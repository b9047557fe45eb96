package gatewaystack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/ledgertest"
	ledgerpg "github.com/txfence/txfence/ledger/postgres"
)

// Ledger is the ledger's read API as ledgerd serves it (mutual TLS, the
// gateway-only allowlist) on a fresh ledger store, whose books are checked
// for conservation when the test ends.
type Ledger struct {
	URL   string
	Store *ledgerpg.Store
	Pool  *pgxpool.Pool
	srv   *httptest.Server
}

// Stop stops serving, as a ledgerd that went down: calls get no answer.
func (l *Ledger) Stop() { l.srv.Close() }

// ServeLedger serves the ledger's read API for the test's duration, with
// the certificates of pki; every exchange is checked against
// openapi/ledger.yaml.
func ServeLedger(t testing.TB, pki string) *Ledger {
	t.Helper()
	a := ledgertest.ServeAPI(t, pki, func(store *ledgerpg.Store) *httpapi.API { return httpapi.New(store, nil) })
	return &Ledger{URL: a.URL, Store: a.Store, Pool: a.Pool, srv: a.Server}
}

// Leg is an entry of amount on addr's account of kind in asset (ledger.Native
// or a token's lower-case address) on chain 31337.
func Leg(kind ledger.AccountKind, asset, addr string, amount int64) ledger.Leg {
	return ledger.Leg{Account: ledger.AccountKey{ChainID: 31337, Asset: asset, Kind: kind, Address: common.HexToAddress(addr)},
		Amount: big.NewInt(amount)}
}

// Book posts a journal of kind on chain 31337, its fact in block n (the
// transaction hash and block hash derived from key and n), and returns its
// id.
func (l *Ledger) Book(t testing.TB, kind ledger.JournalKind, key string, n uint64, legs ...ledger.Leg) int64 {
	t.Helper()
	tx := common.Hash(sha256.Sum256([]byte(key)))
	j := &ledger.Journal{Kind: kind, Key: key, ChainID: 31337, TxHash: &tx, Legs: legs,
		Block: &ledger.Block{Number: n, Hash: sha256.Sum256(binary.BigEndian.AppendUint64(nil, n))}}
	if kind == ledger.Confirmed {
		j.Status = "success"
	}
	p, err := l.Store.Post(context.Background(), j)
	if err != nil {
		t.Fatalf("post %s: %v", key, err)
	}
	return p.JournalID
}

// Transfer books a confirmed transaction in block n: value wei from the
// wallet from to to's counterparty account, and fee wei of gas from the
// wallet to its fee expense. It returns the journal's id.
func (l *Ledger) Transfer(t testing.TB, key, from, to string, value, fee int64, n uint64) int64 {
	t.Helper()
	return l.Book(t, ledger.Confirmed, key, n,
		Leg(ledger.Wallet, ledger.Native, from, -value), Leg(ledger.Counterparty, ledger.Native, to, value),
		Leg(ledger.Wallet, ledger.Native, from, -fee), Leg(ledger.FeeExpense, ledger.Native, from, fee))
}

// Consume has the ledger's feed consumer read txmanager's feed, as
// ledgerd does, until it has booked all of it: the INIT events link
// transfers between chains by their transit ids. Nothing settles in these
// tests, so no chain is read.
func (r *Gateway) Consume(t testing.TB) {
	t.Helper()
	api := r.TxM.API(t, "ledger")
	c := &consumer.Consumer{Store: r.Ledger.Store, API: api, Log: slog.New(slog.DiscardHandler), Wait: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := c.Step(ctx)
		if err != nil {
			t.Fatalf("ledger consumer: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

package postgres

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
)

// The statements of queries/negative.sql.
var qNegativeWalletsAmong = Queries.Use("NegativeWalletsAmong")

// The ledger books every fact the chain settled, even one that takes a
// wallet below zero (the chain moved value the books never saw come in: an
// internal transfer from a contract, a deposit missed). Such a booking is
// flagged: an alert when a booking takes a wallet from zero or more to
// below zero, the txfence_ledger_negative_wallets gauge (Stats) while it
// stays there, and each reconciliation lists it.

// wentNegative is a wallet a booking took below zero.
type wentNegative struct {
	account       ledger.AccountKey
	before, after *big.Int
	journals      []string // the keys of the booking's journals that moved it
}

// walletsWentNegative finds the wallets that the journals just written in
// tx took from zero or more to below zero. The balance rows are locked by
// tx until it ends, so the balances it reads are exactly what its
// journals left, and what they were before is that less what they moved.
func walletsWentNegative(ctx context.Context, tx pgx.Tx, written []*ledger.Journal) ([]wentNegative, error) {
	moved := map[ledger.AccountKey]*big.Int{}
	by := map[ledger.AccountKey][]string{}
	for _, j := range written {
		for _, l := range j.Legs {
			if l.Account.Kind != ledger.Wallet {
				continue
			}
			if moved[l.Account] == nil {
				moved[l.Account] = new(big.Int)
			}
			moved[l.Account].Add(moved[l.Account], l.Amount)
			if !slices.Contains(by[l.Account], j.Key) {
				by[l.Account] = append(by[l.Account], j.Key)
			}
		}
	}
	var chains []int64
	var assets []string
	var addrs [][]byte
	for k, m := range moved {
		if m.Sign() < 0 { // only what took from a wallet can take it below zero
			chains, assets, addrs = append(chains, int64(k.ChainID)), append(assets, k.Asset), append(addrs, k.Address.Bytes())
		}
	}
	if len(chains) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, qNegativeWalletsAmong.SQL, chains, assets, addrs)
	if err != nil {
		return nil, fmt.Errorf("read the balances of wallets booked: %w", err)
	}
	var out []wentNegative
	var chain int64
	var asset, amount string
	var addr []byte
	_, err = pgx.ForEachRow(rows, []any{&chain, &asset, &addr, &amount}, func() error {
		after, err := parseInt(amount)
		if err != nil {
			return err
		}
		k := ledger.AccountKey{ChainID: uint64(chain), Asset: asset, Kind: ledger.Wallet, Address: common.BytesToAddress(addr)}
		if before := new(big.Int).Sub(after, moved[k]); before.Sign() >= 0 {
			out = append(out, wentNegative{account: k, before: before, after: after, journals: by[k]})
		}
		return nil
	})
	return out, err
}

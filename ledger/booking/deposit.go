package booking

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
)

// Inflow is one movement a transaction made: native value or a token's
// Transfer log.
type Inflow struct {
	// Asset is ledger.Native or the token's lower-case address.
	Asset    string
	From, To common.Address
	Amount   *big.Int
}

// DepositKey is the idempotency key of the deposit journal of transaction
// tx in block blockHash.
func DepositKey(chainID uint64, tx, blockHash common.Hash) string {
	return fmt.Sprintf("deposit:%d:%s:%s", chainID, strings.ToLower(tx.Hex()), strings.ToLower(blockHash.Hex()))
}

// OpeningKey is the idempotency key of wallet's opening at block blockHash.
func OpeningKey(chainID uint64, wallet common.Address, blockHash common.Hash) string {
	return fmt.Sprintf("opening:%d:%s:%s", chainID, strings.ToLower(wallet.Hex()), strings.ToLower(blockHash.Hex()))
}

// Deposit books what a transaction sent by an outside address moved to
// wallets: each inflow to a wallet the ledger books in block, from the
// sender's deposit source, or from a wallet when a token moved between two
// of ours (an outsider spending an allowance). Inflows to other addresses,
// of zero, or from a wallet to itself book nothing; nil when nothing is
// left.
//
// It is one journal, unless anyone's contract logs more transfers to our
// wallets in one transaction than a journal holds (ledger.MaxLegs): then
// the legs go on in journals keyed DepositKey/2, /3…, so that no
// transaction can stop the scanner.
func Deposit(chainID uint64, tx common.Hash, block ledger.Block, inflows []Inflow, wallets Wallets) []*ledger.Journal {
	type route struct{ from, to ledger.AccountKey }
	sums := map[route][]*big.Int{} // each at most ledger.MaxAmount
	var order []route
	for _, in := range inflows {
		if in.Amount == nil || in.Amount.Sign() <= 0 || in.From == in.To || !wallets.BooksAt(chainID, in.To, block.Number) {
			continue
		}
		from := ledger.AccountKey{ChainID: chainID, Asset: in.Asset, Kind: ledger.DepositSource, Address: in.From}
		if wallets.BooksAt(chainID, in.From, block.Number) {
			from.Kind = ledger.Wallet
		}
		r := route{from, ledger.AccountKey{ChainID: chainID, Asset: in.Asset, Kind: ledger.Wallet, Address: in.To}}
		amounts := sums[r]
		if amounts == nil {
			order = append(order, r)
		}
		if n := len(amounts); n > 0 && new(big.Int).Add(amounts[n-1], in.Amount).Cmp(ledger.MaxAmount) <= 0 {
			amounts[n-1].Add(amounts[n-1], in.Amount)
		} else {
			amounts = append(amounts, new(big.Int).Set(in.Amount))
		}
		sums[r] = amounts
	}
	var legs []ledger.Leg
	for _, r := range order {
		for _, amount := range sums[r] {
			legs = append(legs, ledger.Leg{Account: r.from, Amount: new(big.Int).Neg(amount)}, ledger.Leg{Account: r.to, Amount: amount})
		}
	}
	var out []*ledger.Journal
	for part := range slices.Chunk(legs, ledger.MaxLegs) { // MaxLegs is even: a pair stays in one journal
		key := DepositKey(chainID, tx, block.Hash)
		if len(out) > 0 {
			key += fmt.Sprintf("/%d", len(out)+1)
		}
		out = append(out, &ledger.Journal{Kind: ledger.Deposit, Key: key, ChainID: chainID, TxHash: &tx, Block: &block, Status: "success", Legs: part})
	}
	return out
}

// Opening books wallet's balances at block, by asset, against its opening
// balance account: the ledger books the wallet's movements after block
// itself. Zero balances book nothing; nil when every balance is zero.
func Opening(chainID uint64, wallet common.Address, block ledger.Block, balances map[string]*big.Int) *ledger.Journal {
	var legs []ledger.Leg
	for _, asset := range slices.Sorted(maps.Keys(balances)) {
		held := balances[asset]
		if held == nil || held.Sign() == 0 {
			continue
		}
		account := ledger.AccountKey{ChainID: chainID, Asset: asset, Kind: ledger.Wallet, Address: wallet}
		equity := account
		equity.Kind = ledger.OpeningBalance
		legs = append(legs, ledger.Leg{Account: account, Amount: new(big.Int).Set(held)}, ledger.Leg{Account: equity, Amount: new(big.Int).Neg(held)})
	}
	if len(legs) == 0 {
		return nil
	}
	return &ledger.Journal{Kind: ledger.Opening, Key: OpeningKey(chainID, wallet, block.Hash), ChainID: chainID, Block: &block, Legs: legs}
}

package ledger

import "github.com/ethereum/go-ethereum/common"

// WalletKey names a wallet: an address of one chain whose movements the
// ledger books as its own.
type WalletKey struct {
	ChainID uint64
	Address common.Address
}

// RegisteredWallet is a wallet in the registry: txmanager's signers, which
// the feed names, and the addresses configured besides them.
type RegisteredWallet struct {
	WalletKey
	// Opened is the block at which the wallet was opened: its balances
	// then are booked by its opening journal, and the ledger books its
	// movements in later blocks. nil until the scanner opens it.
	Opened *Block
}

// BooksAt reports whether the ledger books w's movements in block number:
// w has been opened before it.
func (w RegisteredWallet) BooksAt(number uint64) bool {
	return w.Opened != nil && w.Opened.Number < number
}

package txmanager

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// Restoring txmanager's database from a backup leaves the chain ahead of
// it: transactions sent after the backup was taken are mined at nonces
// the restored database never assigned, and some of them may be intents
// the restored database still holds as waiting for a nonce. A signer's new
// owner looks before it allocates (docs/operations.md, "Restore from a
// backup"): every nonce the chain consumed is skipped, an intent found
// mined is recorded as sent (ReasonFoundMined) rather than sent a second
// time, and every other mined nonce is reported as used outside what the
// database knows (ReasonNonceConsumedExternally, with an alert).

// ReasonFoundMined is the reason of the state change that records an
// intent the restored database held without a nonce and the chain holds
// mined: it was sent before the restore, and is followed from its block.
const ReasonFoundMined = "found_mined_after_restore"

// MaxRestoreScan bounds the nonces a new owner identifies one by one when
// the chain is ahead of the database; past it, the rest are skipped
// unidentified, with an alert.
const MaxRestoreScan = 10_000

// Found is a transaction the chain mined that the database knows only as
// an intent without a nonce: its signed attempt, as read from its block.
type Found struct {
	TxID     uuid.UUID
	Nonce    uint64
	Hash     common.Hash
	Raw      []byte
	GasLimit uint64
	Fees     Fees
	Block    uint64
}

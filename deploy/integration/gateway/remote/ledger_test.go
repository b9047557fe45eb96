package remote_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// TestLedgerCallsKeepTheirKinds: the client reads the ledger's real API
// over mutual TLS as the gateway; the ledger's 404 and 400 come back as
// the same kinds, a ledger that refuses the caller's identity is an
// internal error (the deployment's fault, not the client's), and a ledger
// that does not answer is Unavailable.
func TestLedgerCallsKeepTheirKinds(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	books := gatewaystack.ServeLedger(t, pki)
	id := books.Transfer(t, "tx-1", signer, gatewaystack.Bob, 1000, 21, 5)
	l, err := remote.NewLedger(books.URL, servicetest.Client(t, pki, "gateway", "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	chain, addr, kind := int64(31337), signer, ledgerapi.AccountWallet
	list, err := l.Accounts(ctx, ledgerapi.ListAccountsParams{ChainId: &chain, Address: &addr, Kind: &kind})
	if err != nil || !strings.Contains(string(list), `"balance":"-1021"`) {
		t.Fatalf("accounts: %s %v", list, err)
	}
	j, err := l.Journal(ctx, id)
	if err != nil || j.ChainID != 31337 || len(j.Entries) != 4 || string(j.Fields["kind"]) != `"confirmed"` {
		t.Fatalf("journal: %+v %v", j, err)
	}
	var walletID int64
	for _, e := range j.Entries {
		if e.Account.Kind == ledgerapi.AccountWallet {
			walletID = e.Account.ID
		}
		if e.Account.ChainID != 31337 || !strings.HasPrefix(e.Account.Address, "0x") || len(e.JSON) == 0 {
			t.Errorf("journal entry %+v", e)
		}
	}
	at := int64(4)
	acct, err := l.Account(ctx, walletID, &at)
	if err != nil || acct.Ref.ID != walletID || acct.Ref.Kind != ledgerapi.AccountWallet || acct.Ref.Address != strings.ToLower(signer) ||
		!strings.Contains(string(acct.JSON), `"balance":"0"`) {
		t.Errorf("account as of block 4: %+v %s %v", acct.Ref, acct.JSON, err)
	}
	if st, err := l.Statement(ctx, walletID, ledgerapi.ListAccountEntriesParams{}); err != nil || strings.Count(string(st), `"entry_id"`) != 2 {
		t.Errorf("statement: %s %v", st, err)
	}

	if _, err := l.Account(ctx, 1<<40, nil); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown account: %v, want not found", err)
	}
	if _, err := l.Journal(ctx, 1<<40); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown journal: %v, want not found", err)
	}
	bad := "not-a-cursor"
	if _, err := l.Statement(ctx, walletID, ledgerapi.ListAccountEntriesParams{Cursor: &bad}); !errs.Is(err, errs.Invalid) {
		t.Errorf("a bad cursor: %v, want invalid", err)
	}

	// Another identity is refused by the ledger's allowlist: not the
	// gateway client's fault, so not a 403 to pass on.
	other, err := remote.NewLedger(books.URL, servicetest.Client(t, pki, "txmanager", "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Journal(ctx, id); !errs.Is(err, errs.Internal) {
		t.Errorf("as txmanager: %v, want an internal error", err)
	}

	// A ledger that is not there is Unavailable, so the gateway answers 503.
	gone, err := remote.NewLedger("https://127.0.0.1:1", &http.Client{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Journal(ctx, id); !errs.Is(err, errs.Unavailable) {
		t.Errorf("no ledger: %v, want unavailable", err)
	}
	if _, err := remote.NewLedger(books.URL, nil); err == nil {
		t.Error("a ledger client without an HTTP client")
	}
}

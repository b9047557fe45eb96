package signer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/shared/errs"
)

// Service decides and signs. Every exported method that signs is an oracle
// an attacker who controls txmanager could query: each one is bounded by
// policy, double-sign protection and the audit log before anything leaves.
type Service struct {
	Keys   KeyBackend
	Policy Policy
	Store  Store
	// Now is signerd's clock, for approval expiry and rolling windows.
	Now func() time.Time
}

// Result is the answer to one request of a batch.
type Result struct {
	Request  *Request
	Outcome  Outcome
	Reuse    Reuse
	Decision Decision
	// TxHash and RawTx are set for OutcomeSigned and OutcomeReplayed.
	TxHash common.Hash
	RawTx  []byte
	// AuditSeq is the audit record of this decision.
	AuditSeq uint64
	// Refusal explains OutcomeRefused.
	Refusal *RefusedError
}

// MaxBatch bounds one batch: one transaction holds the audit head for all
// of it.
const MaxBatch = 256

// Sign decides every request and signs those that pass, in one transaction:
// the double-sign records and audit records commit before any signature is
// returned. A request that fails its shape check fails the whole batch
// (Invalid) before anything is decided; a store, key backend or policy
// failure fails it too (nothing is signed: fail closed). Policy refusals
// and double-sign refusals are per-request outcomes, each audited.
//
// As an oracle: Sign signs only typed transactions whose signing hash it
// derives itself, only for keys it holds, only what policy allows at
// signerd's own clock, and never two intents at one nonce. The same
// request twice returns the stored signature, so replays gain nothing.
func (s *Service) Sign(ctx context.Context, caller string, reqs []*Request) ([]Result, error) {
	if err := checkBatch(reqs); err != nil {
		return nil, err
	}
	keys := make(map[common.Address]*Key)
	for _, r := range reqs {
		if keys[r.From] != nil {
			continue
		}
		k, err := s.Keys.Key(ctx, r.From)
		switch {
		case errors.Is(err, ErrUnknownKey):
			return nil, errs.Errorf(errs.Invalid, "signerd holds no key for %s", r.From.Hex())
		case err != nil:
			return nil, errs.Wrap(errs.Unavailable, "key backend unavailable", err)
		}
		keys[r.From] = k
	}

	var results []Result
	err := s.Store.InTx(ctx, func(tx StoreTx) error {
		results = make([]Result, len(reqs))
		if err := tx.LockSigners(ctx, SortSigners(reqs)); err != nil {
			return err
		}
		at := make([]NonceKey, len(reqs))
		for i, r := range reqs {
			at[i] = r.nonceKey()
		}
		// Read under the locks, so nothing another transaction signs can
		// come between this read and the records below. Signatures given
		// in this batch are recorded only after the audit records, so
		// they are added here as they are given, for later requests.
		signed, err := tx.Signed(ctx, at)
		if err != nil {
			return err
		}
		if signed == nil {
			signed = make(map[NonceKey][]Signed)
		}
		now := s.Now()
		spending := newSpending(tx, now)
		entries := make([]AuditEntry, len(reqs))
		for i, r := range reqs {
			res, err := s.decide(ctx, r, keys[r.From], now, signed[at[i]], spending)
			if err != nil {
				return err
			}
			if res.Outcome == OutcomeSigned {
				signed[at[i]] = append(signed[at[i]], res.signed())
				if res.Reuse == Fresh {
					spending.add(r)
				}
			}
			results[i] = res
			entries[i] = s.auditEntry(caller, now, &res)
		}
		records, err := tx.Append(ctx, entries)
		if err != nil {
			return err
		}
		var sigs []Signature
		for i := range results {
			results[i].AuditSeq = records[i].Entry.Seq
			if results[i].Outcome == OutcomeSigned {
				sigs = append(sigs, Signature{Signed: results[i].signed(), Reuse: results[i].Reuse, AuditSeq: results[i].AuditSeq})
			}
		}
		if len(sigs) == 0 {
			return nil
		}
		return tx.Record(ctx, now, sigs)
	})
	if err != nil {
		if errs.KindOf(err) != errs.Internal {
			return nil, err
		}
		return nil, errs.Wrap(errs.Unavailable, "signer store unavailable: nothing was signed", err)
	}
	return results, nil
}

func (r *Request) nonceKey() NonceKey {
	return NonceKey{ChainID: r.ChainID, From: r.From, Nonce: r.Nonce}
}

// signed is the double-sign record of a signed result.
func (res *Result) signed() Signed {
	r := res.Request
	return Signed{
		ChainID: r.ChainID, From: r.From, Nonce: r.Nonce, TxID: r.TxID, Intent: r.Intent(), Digest: r.Digest(),
		FeeCap: r.FeeCap(), TipCap: r.TipCap(), Gas: r.Gas, Value: r.Value, Cancel: res.Reuse == Cancel,
		TxHash: res.TxHash, RawTx: res.RawTx,
	}
}

// decide runs the checks of one request inside the transaction and signs
// it when they pass. earlier holds every signature at its nonce, stored or
// given earlier in this batch, oldest first.
func (s *Service) decide(ctx context.Context, r *Request, key *Key, now time.Time, earlier []Signed, spending *spending) (Result, error) {
	res := Result{Request: r}
	reuse, same, err := CheckReuse(r, earlier, s.Policy.AllowsCancel(r.ChainID, r.From))
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		res.Outcome, res.Refusal = OutcomeRefused, refused
		res.Decision = s.nonceDecision(Deny, RuleDoubleSign, refused.Reason)
		return res, nil
	case err != nil:
		return res, err
	case reuse == Identical:
		res.Outcome, res.Reuse, res.TxHash, res.RawTx = OutcomeReplayed, Identical, same.TxHash, same.RawTx
		res.Decision = s.nonceDecision(Allow, RuleIdenticalRequest, "this exact request was signed before (tx "+same.TxID+")")
		return res, nil
	}
	res.Reuse = reuse

	spent := func(ctx context.Context, window time.Duration) (*big.Int, error) {
		return spending.spent(ctx, r, window)
	}
	if reuse != Fresh {
		// A replacement or a cancel spends nothing new: the window
		// already counts this nonce's original.
		spent = func(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }
	}
	res.Decision, err = s.Policy.Evaluate(ctx, r, now, spent)
	if err != nil {
		return res, fmt.Errorf("evaluate policy: %w", err)
	}
	switch res.Decision.Verdict {
	case Allow:
	case NeedsApproval:
		res.Outcome = OutcomeNeedsApproval
		return res, nil
	default:
		res.Outcome = OutcomeDenied
		return res, nil
	}
	signedTx, err := key.signTx(r.Transaction(), r.ChainSigner())
	if err != nil {
		return res, fmt.Errorf("sign: %w", err)
	}
	if err := checkSignature(signedTx, r); err != nil {
		return res, err
	}
	raw, err := signedTx.MarshalBinary()
	if err != nil {
		return res, fmt.Errorf("encode signed transaction: %w", err)
	}
	res.Outcome, res.TxHash, res.RawTx = OutcomeSigned, signedTx.Hash(), raw
	return res, nil
}

// spending is what the signers of one batch have spent in rolling
// windows: the store's sums, read at most once per signer and window,
// plus the fresh signatures the batch has given so far. Reading each sum
// once is exact: the batch holds its signers' locks, and records its own
// signatures only after every decision, so the stored sums cannot move
// while it decides.
type spending struct {
	tx      StoreTx
	now     time.Time
	stored  map[windowKey]*big.Int
	inBatch map[SignerKey]*big.Int
}

type windowKey struct {
	signer SignerKey
	window time.Duration
}

func newSpending(tx StoreTx, now time.Time) *spending {
	return &spending{tx: tx, now: now, stored: make(map[windowKey]*big.Int), inBatch: make(map[SignerKey]*big.Int)}
}

// spent is the value r's signer signed in the window before now, this
// batch included.
func (s *spending) spent(ctx context.Context, r *Request, window time.Duration) (*big.Int, error) {
	who := SignerKey{ChainID: r.ChainID, From: r.From}
	k := windowKey{who, window}
	sum, ok := s.stored[k]
	if !ok {
		var err error
		if sum, err = s.tx.Spent(ctx, r.ChainID, r.From, s.now.Add(-window)); err != nil {
			return nil, err
		}
		s.stored[k] = sum
	}
	total := new(big.Int).Set(sum)
	if b := s.inBatch[who]; b != nil {
		total.Add(total, b)
	}
	return total, nil
}

// add counts r, a fresh signature given in this batch.
func (s *spending) add(r *Request) {
	who := SignerKey{ChainID: r.ChainID, From: r.From}
	if s.inBatch[who] == nil {
		s.inBatch[who] = new(big.Int)
	}
	s.inBatch[who].Add(s.inBatch[who], r.Value)
}

// nonceDecision is the decision of double-sign protection, which decides
// before policy is asked.
func (s *Service) nonceDecision(v Verdict, rule, reason string) Decision {
	return Decision{Verdict: v, RuleID: rule, Reasons: []string{reason}, PolicyVersion: s.Policy.Version(), PolicyHash: s.Policy.Hash()}
}

// checkSignature recovers the sender of what was just signed: a key that
// signs for another address, or a transaction that is not the request,
// never leaves signerd.
func checkSignature(tx *types.Transaction, r *Request) error {
	from, err := types.Sender(r.ChainSigner(), tx)
	if err != nil {
		return fmt.Errorf("recover sender of the new signature: %w", err)
	}
	if from != r.From {
		return fmt.Errorf("the new signature recovers to %s, not %s", from.Hex(), r.From.Hex())
	}
	if tx.Hash() == (common.Hash{}) || r.ChainSigner().Hash(tx) != r.SigningHash() {
		return errors.New("the signed transaction is not the request")
	}
	return nil
}

// Evaluate is policy's dry-run verdict for a request before a nonce is
// allocated. It signs nothing and writes nothing; rolling windows are
// read as they stand.
//
// As an oracle: it tells a caller what policy would decide, which txmanager
// needs and an attacker could learn from the policy file anyway.
func (s *Service) Evaluate(ctx context.Context, r *Request) (Decision, error) {
	if err := r.Validate(); err != nil {
		return Decision{}, errs.Wrap(errs.Invalid, "invalid request: "+err.Error(), err)
	}
	var d Decision
	err := s.Store.InTx(ctx, func(tx StoreTx) error {
		now := s.Now()
		var err error
		d, err = s.Policy.Evaluate(ctx, r, now, func(ctx context.Context, window time.Duration) (*big.Int, error) {
			return tx.Spent(ctx, r.ChainID, r.From, now.Add(-window))
		})
		return err
	})
	if err != nil {
		return Decision{}, errs.Wrap(errs.Unavailable, "evaluate policy", err)
	}
	return d, nil
}

func (s *Service) auditEntry(caller string, now time.Time, res *Result) AuditEntry {
	r := res.Request
	e := AuditEntry{
		At: now, Caller: caller, TxID: r.TxID, ChainID: r.ChainID, From: r.From, Nonce: r.Nonce,
		RequestDigest: r.Digest(), Outcome: res.Outcome, RuleID: res.Decision.RuleID, Reasons: res.Decision.Reasons,
		Approvals: res.Decision.Approved, PolicyVersion: s.Policy.Version(), PolicyHash: s.Policy.Hash(),
	}
	if res.Outcome != OutcomeRefused {
		e.Reuse = res.Reuse.String()
	}
	if res.Outcome == OutcomeSigned || res.Outcome == OutcomeReplayed {
		h := res.TxHash
		e.TxHash = &h
	}
	return e
}

// checkBatch validates every request's shape, naming each bad one.
func checkBatch(reqs []*Request) error {
	if len(reqs) == 0 {
		return errs.E(errs.Invalid, "no requests")
	}
	if len(reqs) > MaxBatch {
		return errs.Errorf(errs.Invalid, "%d requests in one batch; at most %d", len(reqs), MaxBatch)
	}
	var fields []errs.FieldError
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			fields = append(fields, errs.FieldError{Pointer: fmt.Sprintf("/requests/%d", i), Detail: err.Error()})
		}
	}
	if len(fields) > 0 {
		return errs.InvalidFields("invalid signing request", fields...)
	}
	return nil
}

// SortSigners returns the distinct signers of reqs in a fixed order, the
// order in which their locks are taken.
func SortSigners(reqs []*Request) []SignerKey {
	var keys []SignerKey
	for _, r := range reqs {
		keys = append(keys, SignerKey{ChainID: r.ChainID, From: r.From})
	}
	slices.SortFunc(keys, func(a, b SignerKey) int {
		return cmp.Or(cmp.Compare(a.ChainID, b.ChainID), a.From.Cmp(b.From))
	})
	return slices.Compact(keys)
}

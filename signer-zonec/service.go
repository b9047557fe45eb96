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
		now := s.Now()
		entries := make([]AuditEntry, len(reqs))
		// Signatures given earlier in this batch: recorded only after the
		// audit records, so the later requests must see them from here.
		inBatch := make(map[nonceKey][]Signed)
		spentInBatch := make(map[SignerKey]*big.Int)
		for i, r := range reqs {
			at, who := nonceKey{r.ChainID, r.From, r.Nonce}, SignerKey{r.ChainID, r.From}
			if spentInBatch[who] == nil {
				spentInBatch[who] = new(big.Int)
			}
			res, err := s.decide(ctx, tx, r, keys[r.From], now, inBatch[at], spentInBatch[who])
			if err != nil {
				return err
			}
			if res.Outcome == OutcomeSigned {
				inBatch[at] = append(inBatch[at], res.signed())
				if res.Reuse == Fresh {
					spentInBatch[who].Add(spentInBatch[who], r.Value)
				}
			}
			results[i] = res
			entries[i] = s.auditEntry(caller, now, &res)
		}
		records, err := tx.Append(ctx, entries)
		if err != nil {
			return err
		}
		for i := range results {
			results[i].AuditSeq = records[i].Entry.Seq
			if results[i].Outcome != OutcomeSigned {
				continue
			}
			if err := tx.Record(ctx, results[i].signed(), results[i].Reuse, now, results[i].AuditSeq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errs.KindOf(err) != errs.Internal {
			return nil, err
		}
		return nil, errs.Wrap(errs.Unavailable, "signer store unavailable: nothing was signed", err)
	}
	return results, nil
}

type nonceKey struct {
	chainID uint64
	from    common.Address
	nonce   uint64
}

// signed is the double-sign record of a signed result.
func (res *Result) signed() Signed {
	r := res.Request
	return Signed{
		ChainID: r.ChainID, From: r.From, Nonce: r.Nonce, TxID: r.TxID, Intent: r.Intent(), Digest: r.Digest(),
		FeeCap: r.FeeCap(), TipCap: r.TipCap(), Value: r.Value, Cancel: res.Reuse == Cancel,
		TxHash: res.TxHash, RawTx: res.RawTx,
	}
}

// decide runs the checks of one request inside the transaction and signs
// it when they pass. inBatch holds the signatures given at the same nonce
// earlier in this batch, and spentInBatch the value of the signer's fresh
// signatures earlier in this batch, neither of which the store holds yet.
func (s *Service) decide(ctx context.Context, tx StoreTx, r *Request, key *Key, now time.Time, inBatch []Signed, spentInBatch *big.Int) (Result, error) {
	res := Result{Request: r}
	earlier, err := tx.Signed(ctx, r.ChainID, r.From, r.Nonce)
	if err != nil {
		return res, err
	}
	earlier = append(earlier, inBatch...)
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
		total, err := tx.Spent(ctx, r.ChainID, r.From, now.Add(-window))
		if err != nil {
			return nil, err
		}
		return total.Add(total, spentInBatch), nil
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

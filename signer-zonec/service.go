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

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/signer-zonec/ethtx"
)

// Service decides and signs. Every exported method that signs is an oracle
// an attacker who controls txmanager could query: each one is bounded by
// policy, double-sign protection and the audit log before anything leaves.
type Service struct {
	Keys   KeyBackend
	Policy Policy
	Store  Store
	// MaxNonceAhead bounds how far above a signer's next nonce (one above
	// the highest it signed, or its declared start) a request may be: a
	// briefly compromised txmanager cannot stockpile signatures for
	// nonces far ahead. Zero means DefaultMaxNonceAhead.
	MaxNonceAhead uint64
}

// DefaultMaxNonceAhead is the look-ahead bound when none is set. txmanager
// signs in nonce order, so a nonce is ahead of the next only by the
// allocated transactions before it that signerd has not signed yet (those
// waiting for approvals): a few, never hundreds.
const DefaultMaxNonceAhead = 64

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
// derives itself, only for keys it holds, only what policy allows at the
// database's clock (one clock for every replica), and never two intents
// at one nonce. The same request twice returns the stored signature, so
// replays gain nothing.
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
		// Read under the locks, so nothing another transaction signs can
		// come between this read and the records below. Signatures given
		// in this batch are recorded only after the audit records, so
		// they are added to what was read as they are given, for later
		// requests.
		b, err := s.readBatch(ctx, tx, reqs)
		if err != nil {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		spending := newSpending(tx, now)
		entries := make([]AuditEntry, len(reqs))
		for i, r := range reqs {
			res, err := s.decide(ctx, r, keys[r.From], now, b, spending)
			if err != nil {
				return err
			}
			if res.Outcome == OutcomeSigned {
				b.add(res.signed())
				spending.add(&res)
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
		Token: res.Decision.Token, TxHash: res.TxHash, RawTx: res.RawTx,
	}
}

// batchRecord is what a batch knows of the signatures before each of its
// requests: those stored when it took its signers' locks, and those it gave
// itself since.
type batchRecord struct {
	// atNonce holds every signature at each nonce of the batch, oldest
	// first.
	atNonce map[NonceKey][]Signed
	// firstOfTx is the first signature of each tx id of the batch.
	firstOfTx map[string]Signed
	// next is each signer's next nonce: one above the highest signed, or
	// its declared start.
	next map[SignerKey]uint64
}

func (s *Service) readBatch(ctx context.Context, tx StoreTx, reqs []*Request) (*batchRecord, error) {
	at, txIDs := make([]NonceKey, len(reqs)), make([]string, len(reqs))
	for i, r := range reqs {
		at[i], txIDs[i] = r.nonceKey(), r.TxID
	}
	b := &batchRecord{}
	var err error
	if b.atNonce, err = tx.Signed(ctx, at); err != nil {
		return nil, err
	}
	if b.firstOfTx, err = tx.FirstOfTx(ctx, txIDs); err != nil {
		return nil, err
	}
	if b.next, err = tx.NextNonces(ctx, SortSigners(reqs)); err != nil {
		return nil, err
	}
	if b.atNonce == nil {
		b.atNonce = make(map[NonceKey][]Signed)
	}
	if b.firstOfTx == nil {
		b.firstOfTx = make(map[string]Signed)
	}
	if b.next == nil {
		b.next = make(map[SignerKey]uint64)
	}
	return b, nil
}

// add counts a signature the batch has just given.
func (b *batchRecord) add(sig Signed) {
	at := NonceKey{ChainID: sig.ChainID, From: sig.From, Nonce: sig.Nonce}
	b.atNonce[at] = append(b.atNonce[at], sig)
	if _, ok := b.firstOfTx[sig.TxID]; !ok {
		b.firstOfTx[sig.TxID] = sig
	}
	who := SignerKey{ChainID: sig.ChainID, From: sig.From}
	if sig.Nonce >= b.next[who] {
		b.next[who] = sig.Nonce + 1
	}
}

// bound refuses what no policy may allow at any price: a tx id at a second
// nonce (the approvals given for it would sign twice), and a fresh nonce
// too far above the signer's next one.
func (s *Service) bound(r *Request, b *batchRecord, fresh bool) *RefusedError {
	if first, ok := b.firstOfTx[r.TxID]; ok && (first.ChainID != r.ChainID || first.From != r.From || first.Nonce != r.Nonce) {
		return &RefusedError{Rule: RuleTxIDBinding, Earlier: first, Reason: fmt.Sprintf(
			"tx %s was signed at nonce %d of %s on chain %d: a tx id is bound to the first nonce it is signed at", r.TxID, first.Nonce, first.From.Hex(), first.ChainID)}
	}
	ahead := cmp.Or(s.MaxNonceAhead, DefaultMaxNonceAhead)
	next := b.next[SignerKey{ChainID: r.ChainID, From: r.From}]
	if fresh && r.Nonce >= next && r.Nonce-next >= ahead {
		return &RefusedError{Rule: RuleNonceAhead, Reason: fmt.Sprintf(
			"nonce %d is %d above the next nonce %d of this signer; at most %d ahead is signed", r.Nonce, r.Nonce-next, next, ahead-1)}
	}
	return nil
}

// decide runs the checks of one request inside the transaction and signs
// it when they pass.
func (s *Service) decide(ctx context.Context, r *Request, key *Key, now time.Time, b *batchRecord, spending *spending) (Result, error) {
	res := Result{Request: r}
	earlier := b.atNonce[r.nonceKey()]
	reuse, same, err := CheckReuse(r, earlier, s.Policy.AllowsCancel(r.ChainID, r.From))
	if err == nil && reuse != Identical {
		if refusal := s.bound(r, b, reuse == Fresh); refusal != nil {
			err = refusal
		}
	}
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		res.Outcome, res.Refusal = OutcomeRefused, refused
		res.Decision = s.nonceDecision(Deny, refused.Rule, refused.Reason)
		return res, nil
	case err != nil:
		return res, err
	case reuse == Identical:
		res.Outcome, res.Reuse, res.TxHash, res.RawTx = OutcomeReplayed, Identical, same.TxHash, same.RawTx
		res.Decision = s.nonceDecision(Allow, RuleIdenticalRequest, "this exact request was signed before (tx "+same.TxID+")")
		return res, nil
	}
	res.Reuse = reuse

	evaluate := s.Policy.Evaluate
	if reuse == Cancel {
		evaluate = s.Policy.EvaluateCancel
	}
	res.Decision, err = evaluate(ctx, r, now, spending.of(r, reuse))
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
	signedTx, err := key.signTx(r.Transaction())
	if err != nil {
		return res, fmt.Errorf("sign: %w", err)
	}
	raw := signedTx.Raw()
	if err := checkSignature(raw, r); err != nil {
		return res, err
	}
	res.Outcome, res.TxHash, res.RawTx = OutcomeSigned, signedTx.Hash(), raw
	return res, nil
}

// spending is what the signers of one batch have signed in rolling
// windows: the store's sums, each read at most once per batch, plus the
// signatures the batch has given so far. Reading each sum once is exact:
// the batch holds its signers' locks, and records its own signatures only
// after every decision, so the stored sums cannot move while it decides.
type spending struct {
	tx     StoreTx
	now    time.Time
	stored map[usageKey]*big.Int
	// inBatch sums the batch's fresh signatures by signer (value) and by
	// signer and token (token units); fees holds the costliest signature
	// of each nonce the batch signed at.
	inBatch map[usageKey]*big.Int
	fees    map[NonceKey]*big.Int
}

// usageKey names one sum: a signer's value (token zero) or its units of
// one token, or its fees leaving out one nonce, within a window.
type usageKey struct {
	signer SignerKey
	kind   usageKind
	token  common.Address
	nonce  uint64
	window time.Duration
}

type usageKind int

const (
	usageValue usageKind = iota
	usageToken
	usageFees
)

func newSpending(tx StoreTx, now time.Time) *spending {
	return &spending{tx: tx, now: now, stored: make(map[usageKey]*big.Int), inBatch: make(map[usageKey]*big.Int), fees: make(map[NonceKey]*big.Int)}
}

// of is the Usage that policy sees for r. A replacement or a cancel moves
// no value or tokens that its nonce's original did not: for them only the
// fee window counts anything.
func (s *spending) of(r *Request, reuse Reuse) Usage {
	return requestUsage{s: s, r: r, fresh: reuse == Fresh}
}

// add counts res, a signature the batch has just given.
func (s *spending) add(res *Result) {
	r, who := res.Request, SignerKey{ChainID: res.Request.ChainID, From: res.Request.From}
	if res.Reuse == Fresh {
		addTo(s.inBatch, usageKey{signer: who, kind: usageValue}, r.Value)
		if t := res.Decision.Token; t != nil {
			addTo(s.inBatch, usageKey{signer: who, kind: usageToken, token: t.Contract}, t.Amount)
		}
	}
	at := r.nonceKey()
	if cost := r.MaxFee(); s.fees[at] == nil || cost.Cmp(s.fees[at]) > 0 {
		s.fees[at] = cost
	}
}

func addTo(m map[usageKey]*big.Int, k usageKey, v *big.Int) {
	if m[k] == nil {
		m[k] = new(big.Int)
	}
	m[k].Add(m[k], v)
}

// sum is the stored sum for k, read once, plus what the batch added.
func (s *spending) sum(ctx context.Context, k usageKey, read func(since time.Time) (*big.Int, error)) (*big.Int, error) {
	stored, ok := s.stored[k]
	if !ok {
		var err error
		if stored, err = read(s.now.Add(-k.window)); err != nil {
			return nil, err
		}
		s.stored[k] = stored
	}
	total := new(big.Int).Set(stored)
	switch k.kind {
	case usageFees:
		for at, cost := range s.fees {
			if at.ChainID == k.signer.ChainID && at.From == k.signer.From && at.Nonce != k.nonce {
				total.Add(total, cost)
			}
		}
	default:
		if b := s.inBatch[usageKey{signer: k.signer, kind: k.kind, token: k.token}]; b != nil {
			total.Add(total, b)
		}
	}
	return total, nil
}

// requestUsage is the Usage of one request of the batch.
type requestUsage struct {
	s     *spending
	r     *Request
	fresh bool
}

func (u requestUsage) key(kind usageKind, window time.Duration) usageKey {
	return usageKey{signer: SignerKey{ChainID: u.r.ChainID, From: u.r.From}, kind: kind, window: window}
}

func (u requestUsage) Value(ctx context.Context, window time.Duration) (*big.Int, error) {
	if !u.fresh {
		return new(big.Int), nil
	}
	return u.s.sum(ctx, u.key(usageValue, window), func(since time.Time) (*big.Int, error) {
		return u.s.tx.Spent(ctx, u.r.ChainID, u.r.From, since)
	})
}

func (u requestUsage) Token(ctx context.Context, token common.Address, window time.Duration) (*big.Int, error) {
	if !u.fresh {
		return new(big.Int), nil
	}
	k := u.key(usageToken, window)
	k.token = token
	return u.s.sum(ctx, k, func(since time.Time) (*big.Int, error) {
		return u.s.tx.SpentToken(ctx, u.r.ChainID, u.r.From, token, since)
	})
}

func (u requestUsage) Fees(ctx context.Context, window time.Duration) (*big.Int, error) {
	k := u.key(usageFees, window)
	k.nonce = u.r.Nonce
	return u.s.sum(ctx, k, func(since time.Time) (*big.Int, error) {
		return u.s.tx.Fees(ctx, u.r.ChainID, u.r.From, since, u.r.Nonce)
	})
}

// nonceDecision is the decision of double-sign protection, which decides
// before policy is asked.
func (s *Service) nonceDecision(v Verdict, rule, reason string) Decision {
	return Decision{Verdict: v, RuleID: rule, Reasons: []string{reason}, PolicyVersion: s.Policy.Version(), PolicyHash: s.Policy.Hash()}
}

// checkSignature decodes the raw transaction about to leave signerd, as a
// node would, and recovers its sender: a key that signs for another
// address, or bytes that are not the request (an encoder fault), never
// leave signerd.
func checkSignature(raw []byte, r *Request) error {
	tx, err := ethtx.Decode(raw)
	if err != nil {
		return fmt.Errorf("decode the new signature: %w", err)
	}
	if from := tx.Sender(); from != r.From {
		return fmt.Errorf("the new signature recovers to %s, not %s", from.Hex(), r.From.Hex())
	}
	got, err := tx.Tx().SigningHash()
	if err != nil {
		return fmt.Errorf("signing hash of the new signature: %w", err)
	}
	if want, err := r.SigningHash(); err != nil || got != want {
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
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		d, err = s.Policy.Evaluate(ctx, r, now, newSpending(tx, now).of(r, Fresh))
		return err
	})
	if err != nil {
		return Decision{}, errs.Wrap(errs.Unavailable, "evaluate policy", err)
	}
	return d, nil
}

// CheckApprovals says whether r's approvals, and rejection if not nil,
// would count for the rule that needs approval, at the store's clock; it
// signs and records nothing. txmanager asks before it stores an approval
// or a rejection. As an oracle it tells whether a signature by an
// approver is good for a request, which the caller (txmanager, holding
// the signatures it asks about) learns anyway when it signs.
func (s *Service) CheckApprovals(ctx context.Context, r *Request, rejection *Rejection) (ApprovalCheck, error) {
	if err := r.Validate(); err != nil {
		return ApprovalCheck{}, errs.Wrap(errs.Invalid, "invalid request: "+err.Error(), err)
	}
	if rejection != nil && rejection.Expiry.Nanosecond() != 0 {
		return ApprovalCheck{}, errs.E(errs.Invalid, "rejection: expiry must be a whole second (the approver's signature covers seconds)")
	}
	var now time.Time
	err := s.Store.InTx(ctx, func(tx StoreTx) error {
		var err error
		now, err = tx.Now(ctx)
		return err
	})
	if err != nil {
		return ApprovalCheck{}, errs.Wrap(errs.Unavailable, "read the store's clock", err)
	}
	return s.Policy.CheckApprovals(r, rejection, now), nil
}

func (s *Service) auditEntry(caller string, now time.Time, res *Result) AuditEntry {
	r := res.Request
	e := AuditEntry{
		At: now, Caller: caller, TxID: r.TxID, ChainID: r.ChainID, From: r.From, Nonce: r.Nonce,
		RequestDigest: r.Digest(), Outcome: res.Outcome, RuleID: res.Decision.RuleID, Reasons: res.Decision.Reasons,
		Approvals: res.Decision.Approved, PolicyVersion: s.Policy.Version(), PolicyHash: s.Policy.Hash(),
	}
	full := FullRequestDigest(r)
	e.FullRequestDigest = &full
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

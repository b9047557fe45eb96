package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

func (a *API) listSigners(w http.ResponseWriter, r *http.Request) {
	out := gatewayapi.SignerList{Signers: []gatewayapi.SignerRef{}}
	for _, s := range caller(r.Context()).signers {
		out.Signers = append(out.Signers, gatewayapi.SignerRef{ChainId: int64(s.ChainID), Address: s.Address.Hex()})
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *API) signerStatus(w http.ResponseWriter, r *http.Request) error {
	chainID, _ := strconv.ParseUint(chi.URLParam(r, "chain_id"), 10, 63)
	signer := gateway.SignerRef{ChainID: chainID, Address: common.HexToAddress(chi.URLParam(r, "address"))}
	if !caller(r.Context()).mayUse(signer) {
		return errs.Errorf(errs.NotFound, "no signer %s", signer)
	}
	status, err := a.cfg.TxManager.SignerStatus(r.Context(), chainID, signer.Address.Hex())
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, status)
	return nil
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request) error {
	var body gatewayapi.KeyCreateRequest
	if err := httpserver.DecodeStrict(r.Body, &body); err != nil {
		return err
	}
	p := caller(r.Context())
	nk := gateway.NewKey{Tenant: p.tenant.ID, Name: body.Name, ExpiresAt: body.ExpiresAt}
	for _, s := range body.Scopes {
		nk.Scopes = append(nk.Scopes, gateway.Scope(s))
	}
	if body.Signers != nil {
		for i, s := range *body.Signers {
			ref, err := gateway.ParseSignerRef(s)
			if err != nil {
				return errs.InvalidFields(err.Error(), errs.FieldError{Pointer: "/signers/" + strconv.Itoa(i), Detail: err.Error()})
			}
			nk.Signers = append(nk.Signers, ref)
		}
	}
	if nk.ExpiresAt != nil && !nk.ExpiresAt.After(time.Now()) {
		return errs.InvalidFields("expires_at is in the past", errs.FieldError{Pointer: "/expires_at", Detail: "must be in the future"})
	}
	if !p.key.Covers(gateway.Key{Scopes: nk.Scopes, Signers: nk.Signers}) {
		return errs.E(errs.Forbidden, "a key may grant only scopes and signers it has itself: "+reach(p.key))
	}
	key, token, err := a.cfg.Store.CreateKey(r.Context(), nk)
	if err != nil {
		return err
	}
	k := toKey(key)
	httpserver.WriteJSON(w, http.StatusCreated, gatewayapi.KeyCreated{KeyId: k.KeyId, Name: k.Name, Scopes: k.Scopes, Signers: k.Signers,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt, Token: token})
	return nil
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	keys, err := a.cfg.Store.Keys(r.Context(), p.tenant.ID)
	if err != nil {
		return err
	}
	out := gatewayapi.KeyList{Keys: []gatewayapi.Key{}}
	for i := len(keys) - 1; i >= 0; i-- { // newest first
		if p.key.Covers(keys[i]) {
			out.Keys = append(out.Keys, toKey(keys[i]))
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request) error {
	id, err := uuid.Parse(chi.URLParam(r, "key_id"))
	if err != nil {
		return errs.InvalidFields("key_id is not a key id", errs.FieldError{Pointer: "key_id", Detail: err.Error()})
	}
	// A key beyond the caller's reach is not found, as another tenant's.
	p := caller(r.Context())
	key, err := a.cfg.Store.RevokeKey(r.Context(), p.tenant.ID, id, p.key.Covers)
	if err != nil {
		return err
	}
	a.keys.forgetKey(id)
	httpserver.WriteJSON(w, http.StatusOK, toKey(key))
	return nil
}

func (a *API) me(w http.ResponseWriter, r *http.Request) {
	p := caller(r.Context())
	httpserver.WriteJSON(w, http.StatusOK, gatewayapi.Me{TenantId: p.tenant.ID, TenantName: p.tenant.Name, Key: toKey(p.key)})
}

func toKey(k gateway.Key) gatewayapi.Key {
	out := gatewayapi.Key{KeyId: k.ID, Name: k.Name, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, Scopes: []gatewayapi.Scope{}}
	for _, s := range k.Scopes {
		out.Scopes = append(out.Scopes, gatewayapi.Scope(s))
	}
	if len(k.Signers) > 0 {
		signers := make([]string, len(k.Signers))
		for i, s := range k.Signers {
			signers[i] = s.String()
		}
		out.Signers = &signers
	}
	return out
}

// reach describes what a key may grant, for its refusals.
func reach(k gateway.Key) string {
	signers := "every signer of the tenant"
	if k.Restricted() {
		signers = "signers " + joinSigners(k.Signers)
	}
	scopes := make([]string, len(k.Scopes))
	for i, sc := range k.Scopes {
		scopes[i] = string(sc)
	}
	return "this key has scopes " + strings.Join(scopes, ", ") + " over " + signers
}

func joinSigners(refs []gateway.SignerRef) string {
	out := make([]string, len(refs))
	for i, s := range refs {
		out[i] = s.String()
	}
	return strings.Join(out, ", ")
}

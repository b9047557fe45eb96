package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// Webhooks is the webhook engine the subscription endpoints call
// (gateway/webhook).
type Webhooks = webhook.Service

func (a *API) mountWebhooks(r chi.Router) {
	// A gateway built without the engine answers 503.
	r.Use(need(gateway.ScopeWebhooks), configuredOnly(a.cfg.Webhooks != nil, "webhooks are not configured on this gateway"))
	r.Post("/", httpserver.Handle(a.createWebhook))
	r.Get("/", httpserver.Handle(a.listWebhooks))
	r.Get("/{webhook_id}", httpserver.Handle(a.getWebhook))
	r.Patch("/{webhook_id}", httpserver.Handle(a.updateWebhook))
	r.Delete("/{webhook_id}", httpserver.Handle(a.deleteWebhook))
	r.Post("/{webhook_id}/rotate-secret", httpserver.Handle(a.rotateWebhookSecret))
	r.Post("/{webhook_id}/test", httpserver.Handle(a.testWebhook))
	r.Get("/{webhook_id}/deliveries", httpserver.Handle(a.listWebhookDeliveries))
	r.Post("/{webhook_id}/replay", httpserver.Handle(a.replayWebhook))
}

// webhookParam reads the {webhook_id} of the path.
func webhookParam(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "webhook_id"))
	if err != nil {
		return id, errs.InvalidFields("webhook_id is not a webhook id", errs.FieldError{Pointer: "webhook_id", Detail: err.Error()})
	}
	return id, nil
}

// reachableWebhook reads the {webhook_id} of the path and answers, for a
// key limited to some signers, errs.NotFound when the subscription's
// signer filter goes beyond them (an empty filter, every signer, does):
// such a subscription is out of the key's reach, as another tenant's is.
func (a *API) reachableWebhook(r *http.Request) (uuid.UUID, error) {
	id, err := webhookParam(r)
	if err != nil {
		return id, err
	}
	p := caller(r.Context())
	if !p.key.Restricted() {
		return id, nil
	}
	s, err := a.cfg.Webhooks.Subscription(r.Context(), p.tenant.ID, id)
	if err != nil {
		return id, err
	}
	if !inReach(p.key, s) {
		return id, errs.Errorf(errs.NotFound, "no webhook subscription %s", id)
	}
	return id, nil
}

// inReach reports whether key may see and act on subscription s.
func inReach(key gateway.Key, s webhook.Subscription) bool {
	refs := make([]gateway.SignerRef, 0, len(s.Signers))
	for _, name := range s.Signers {
		ref, err := gateway.ParseSignerRef(name)
		if err != nil {
			return false
		}
		refs = append(refs, ref)
	}
	return key.CoversSigners(refs)
}

// checkSignerFilter refuses, for a key limited to some signers, a filter
// that is empty (every signer of the tenant) or names a signer beyond
// them: a restricted key subscribes to its own signers' events only.
func checkSignerFilter(key gateway.Key, filter []string) error {
	if !key.Restricted() {
		return nil
	}
	refs := make([]gateway.SignerRef, 0, len(filter))
	for _, name := range filter {
		ref, err := gateway.ParseSignerRef(name)
		if err != nil {
			return nil // the store names the bad entry
		}
		refs = append(refs, ref)
	}
	if !key.CoversSigners(refs) {
		return errs.E(errs.Forbidden, "a key limited to signers "+joinSigners(key.Signers)+" subscribes to some of them only: name them in signers")
	}
	return nil
}

func (a *API) createWebhook(w http.ResponseWriter, r *http.Request) error {
	var in webhook.NewSubscription
	if err := httpserver.DecodeStrict(r.Body, &in); err != nil {
		return err
	}
	if err := checkSignerFilter(caller(r.Context()).key, in.Signers); err != nil {
		return err
	}
	made, err := a.cfg.Webhooks.CreateSubscription(r.Context(), caller(r.Context()).tenant.ID, in)
	if err != nil {
		return err
	}
	wh := toWebhook(made.Subscription)
	httpserver.WriteJSON(w, http.StatusCreated, gatewayapi.WebhookCreated{Id: wh.Id, Url: wh.Url, Description: wh.Description,
		EventTypes: wh.EventTypes, Signers: wh.Signers, Enabled: wh.Enabled, CreatedAt: wh.CreatedAt, UpdatedAt: wh.UpdatedAt,
		Secrets: wh.Secrets, Secret: string(made.Secret)})
	return nil
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	page, err := a.cfg.Webhooks.Subscriptions(r.Context(), caller(r.Context()).tenant.ID, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	// A page may hold fewer than the limit for a restricted key: the
	// subscriptions beyond its reach are left out.
	out := gatewayapi.WebhookList{Webhooks: []gatewayapi.Webhook{}, NextCursor: page.NextCursor}
	for _, s := range page.Subscriptions {
		if inReach(caller(r.Context()).key, s) {
			out.Webhooks = append(out.Webhooks, toWebhook(s))
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	s, err := a.cfg.Webhooks.Subscription(r.Context(), caller(r.Context()).tenant.ID, id)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toWebhook(s))
	return nil
}

func (a *API) updateWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	var patch webhook.SubscriptionPatch
	if err := httpserver.DecodeStrict(r.Body, &patch); err != nil {
		return err
	}
	if patch.Signers != nil {
		if err := checkSignerFilter(caller(r.Context()).key, *patch.Signers); err != nil {
			return err
		}
	}
	s, err := a.cfg.Webhooks.UpdateSubscription(r.Context(), caller(r.Context()).tenant.ID, id, patch)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toWebhook(s))
	return nil
}

func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err == nil {
		err = a.cfg.Webhooks.DeleteSubscription(r.Context(), caller(r.Context()).tenant.ID, id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	var body gatewayapi.WebhookRotateRequest
	if r.ContentLength != 0 {
		if err := httpserver.DecodeStrict(r.Body, &body); err != nil {
			return err
		}
	}
	grace := webhook.DefaultSecretGrace
	if body.GraceSeconds != nil {
		grace = time.Duration(*body.GraceSeconds) * time.Second
	}
	made, err := a.cfg.Webhooks.RotateSecret(r.Context(), caller(r.Context()).tenant.ID, id, grace)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, gatewayapi.WebhookSecretRotated{Secret: string(made.Secret), Webhook: toWebhook(made.Subscription)})
	return nil
}

func (a *API) testWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	res, err := a.cfg.Webhooks.Test(r.Context(), caller(r.Context()).tenant.ID, id)
	if err != nil {
		return err
	}
	out := gatewayapi.WebhookTestResult{Ok: res.Delivered, DurationMs: res.DurationMS}
	if res.StatusCode != 0 {
		out.StatusCode = &res.StatusCode
	}
	if res.Error != "" {
		out.Error = &res.Error
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	page, err := a.cfg.Webhooks.Deliveries(r.Context(), caller(r.Context()).tenant.ID, id,
		webhook.DeliveryFilter{Status: webhook.DeliveryStatus(q.Get("status")), Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	out := gatewayapi.WebhookDeliveryList{Deliveries: []gatewayapi.WebhookDelivery{}, NextCursor: page.NextCursor}
	for _, d := range page.Deliveries {
		out.Deliveries = append(out.Deliveries, toDelivery(d))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) replayWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := a.reachableWebhook(r)
	if err != nil {
		return err
	}
	var body gatewayapi.WebhookReplayRequest
	if err := httpserver.DecodeStrict(r.Body, &body); err != nil {
		return err
	}
	if !a.replayBudget(w, r) {
		return nil
	}
	res, err := a.cfg.Webhooks.Replay(r.Context(), caller(r.Context()).tenant.ID, id, uint64(body.FromSeq))
	if err != nil {
		return err
	}
	out := gatewayapi.WebhookReplayResult{Queued: int(res.Queued), FromSeq: int64(res.FromSeq), ThroughSeq: int64(res.ThroughSeq)}
	if res.NextFromSeq != 0 {
		next := int64(res.NextFromSeq)
		out.NextFromSeq = &next
	}
	httpserver.WriteJSON(w, http.StatusAccepted, out)
	return nil
}

func toWebhook(s webhook.Subscription) gatewayapi.Webhook {
	out := gatewayapi.Webhook{Id: s.ID, Url: s.URL, Enabled: s.Enabled, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		EventTypes: []gatewayapi.WebhookEventType{}, Secrets: []gatewayapi.WebhookSecretInfo{}}
	if s.Description != "" {
		out.Description = &s.Description
	}
	for _, t := range s.EventTypes {
		out.EventTypes = append(out.EventTypes, components.EventType(t))
	}
	if s.Signers != nil {
		signers := append([]string{}, s.Signers...)
		out.Signers = &signers
	}
	for _, sec := range s.Secrets {
		id := sec.ID.String()
		out.Secrets = append(out.Secrets, gatewayapi.WebhookSecretInfo{Id: &id, CreatedAt: sec.CreatedAt, ExpiresAt: sec.ExpiresAt})
	}
	return out
}

func toDelivery(d webhook.Delivery) gatewayapi.WebhookDelivery {
	out := gatewayapi.WebhookDelivery{Id: d.ID, EventSeq: int64(d.EventSeq), EventId: d.EventID, EventType: d.EventType,
		Status: gatewayapi.WebhookDeliveryStatus(d.Status), NextAttemptAt: d.NextAttemptAt, LastStatusCode: d.LastStatusCode,
		LastError: d.LastError, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt, Attempts: []gatewayapi.WebhookAttempt{}}
	if id, err := uuid.Parse(d.TxID); err == nil {
		out.TxId = id
	}
	for _, at := range d.AttemptLog {
		out.Attempts = append(out.Attempts, gatewayapi.WebhookAttempt{At: at.At, StatusCode: at.StatusCode, Error: at.Error, DurationMs: at.DurationMS})
	}
	return out
}

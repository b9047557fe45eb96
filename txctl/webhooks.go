package txctl

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

func webhookCommands() []*command {
	const group = "Webhooks (scope webhooks)"
	id := func(run func(x *env, id gatewayapi.WebhookIdPath) error) func(*flag.FlagSet) func(*env, []string) error {
		return func(*flag.FlagSet) func(*env, []string) error {
			return func(x *env, args []string) error {
				wid, err := parseID(x.cmd.name, "webhook", args[0])
				if err != nil {
					return err
				}
				return run(x, wid)
			}
		}
	}
	return []*command{
		{name: "webhooks create", group: group, summary: "subscribe a URL to the tenant's events",
			args: "--url URL [--event-type TYPE]... [--signer CHAIN_ID:ADDRESS]... [--description TEXT]",
			about: `Deliveries start with the next event. The answer shows the signing
secret once: store it to verify deliveries (Standard Webhooks).`,
			define: defineWebhookCreate},
		{name: "webhooks list", group: group, summary: "the tenant's subscriptions", define: defineWebhookList},
		{name: "webhooks get", group: group, summary: "one subscription", args: "ID", minArgs: 1, maxArgs: 1,
			define: id(func(x *env, wid gatewayapi.WebhookIdPath) error {
				resp, err := x.api.GetWebhookWithResponse(x.ctx, wid)
				if err := x.check("get webhook "+wid.String(), resp, err, http.StatusOK); err != nil {
					return err
				}
				if x.json {
					return x.jsonLine(resp.Body)
				}
				return printWebhook(x, resp.JSON200, nil)
			})},
		{name: "webhooks update", group: group, summary: "change a subscription: only the flags given",
			args:    "ID [--url URL] [--description TEXT] [--event-type TYPE]... [--signer CHAIN_ID:ADDRESS]... [--enable|--disable]",
			minArgs: 1, maxArgs: 1,
			about: `Filters apply to events fanned out from then on. --event-type and --signer
replace the lists; --all-events and --all-signers clear them. Disabling
stops new deliveries (pending ones are still attempted).`,
			define: defineWebhookUpdate},
		{name: "webhooks delete", group: group, summary: "delete a subscription and its pending deliveries", args: "ID", minArgs: 1, maxArgs: 1,
			define: id(func(x *env, wid gatewayapi.WebhookIdPath) error {
				resp, err := x.api.DeleteWebhookWithResponse(x.ctx, wid)
				if err := x.check("delete webhook "+wid.String(), resp, err, http.StatusNoContent); err != nil {
					return err
				}
				if x.json { // 204: no document to print
					return nil
				}
				_, err = fmt.Fprintf(x.stdout, "deleted webhook %s\n", wid)
				return err
			})},
		{name: "webhooks test", group: group, summary: "send one signed test delivery now and show what the receiver did",
			args: "ID", minArgs: 1, maxArgs: 1,
			about:  `Exits 1 when the receiver did not answer 2xx.`,
			define: id(runWebhookTest)},
		{name: "webhooks deliveries", group: group, summary: "a subscription's delivery log, newest first",
			args: "ID [--status pending|delivered|dead]", minArgs: 1, maxArgs: 1, define: defineWebhookDeliveries},
		{name: "webhooks replay", group: group, summary: "deliver the subscription's events again from a seq, dead ones included",
			args: "ID --from-seq SEQ", minArgs: 1, maxArgs: 1, define: defineWebhookReplay},
		{name: "webhooks rotate-secret", group: group, summary: "start signing with a new secret, shown once",
			args: "ID [--grace 24h]", minArgs: 1, maxArgs: 1,
			about: `Until the old secrets expire (after --grace, 24h by default; 0 ends them
now) every delivery carries a signature with each, so receivers switch
over without losing a delivery.`,
			define: defineWebhookRotate},
		{name: "webhooks listen", group: group, summary: "receive deliveries locally: verify their signatures and print them",
			args:    "--secret whsec_... [--secret ...] [--addr HOST:PORT] [--path PATH] [--count N]",
			streams: true, local: true, about: listenAbout, define: defineWebhookListen},
	}
}

var webhookEventTypes = []components.EventType{components.EventTxStateChanged, components.EventTxAttempt,
	components.EventTxConfirmation, components.EventTxReorged}

func eventTypes(cmd string, names []string) ([]gatewayapi.WebhookEventType, error) {
	out := []gatewayapi.WebhookEventType{}
	for _, n := range names {
		t, err := enumFlag(cmd, "event-type", n, components.EventType.Valid, webhookEventTypes...)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func defineWebhookCreate(fs *flag.FlagSet) func(*env, []string) error {
	var url, description string
	var types, signers multiFlag
	var disabled bool
	fs.StringVar(&url, "url", "", "the receiver's https `URL` (required; this --url is the webhook's, not the API's)")
	fs.Var(&types, "event-type", "only this event `TYPE` (repeatable): tx.state_changed, tx.attempt, tx.confirmation, tx.reorged; default all")
	fs.Var(&signers, "signer", "only this signer's events, `CHAIN_ID:ADDRESS` (repeatable); default every signer the tenant owns, now and later")
	fs.StringVar(&description, "description", "", "a `TEXT` for people")
	fs.BoolVar(&disabled, "disabled", false, "create it disabled: no deliveries until enabled")
	return func(x *env, _ []string) error {
		if url == "" {
			return usagef("webhooks create", "webhooks create needs --url")
		}
		body := gatewayapi.WebhookCreateRequest{Url: url}
		if len(types) > 0 {
			t, err := eventTypes("webhooks create", types)
			if err != nil {
				return err
			}
			body.EventTypes = &t
		}
		if len(signers) > 0 {
			s := []string(signers)
			body.Signers = &s
		}
		if description != "" {
			body.Description = &description
		}
		if disabled {
			enabled := false
			body.Enabled = &enabled
		}
		resp, err := x.api.CreateWebhookWithResponse(x.ctx, body)
		if err := x.check("create webhook", resp, err, http.StatusCreated); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		c := resp.JSON201
		w := gatewayapi.Webhook{Id: c.Id, Url: c.Url, Description: c.Description, Enabled: c.Enabled, EventTypes: c.EventTypes,
			Signers: c.Signers, Secrets: c.Secrets, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
		return printWebhook(x, &w, func(f *fields) { f.add("secret", c.Secret+"   (shown only now: store it)") })
	}
}

// printWebhook prints a subscription; extra adds fields at the top.
func printWebhook(x *env, w *gatewayapi.Webhook, extra func(*fields)) error {
	var f fields
	if extra != nil {
		extra(&f)
	}
	f.add("id", w.Id.String())
	f.add("url", w.Url)
	f.str("description", w.Description)
	f.add("enabled", strconv.FormatBool(w.Enabled))
	f.add("event_types", joinTypes(w.EventTypes))
	f.add("signers", joinSigners(w.Signers))
	for i, s := range w.Secrets {
		desc := "created " + formatTime(s.CreatedAt)
		if s.ExpiresAt != nil {
			desc += ", expires " + formatTime(*s.ExpiresAt)
		}
		if s.Id != nil {
			desc = *s.Id + ": " + desc
		}
		f.add("secret "+strconv.Itoa(i+1), desc)
	}
	f.add("created_at", formatTime(w.CreatedAt))
	f.add("updated_at", formatTime(w.UpdatedAt))
	return f.write(x.stdout)
}

func joinTypes(ts []gatewayapi.WebhookEventType) string {
	if len(ts) == 0 {
		return "all"
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}

func joinSigners(s *[]gatewayapi.SignerName) string {
	if s == nil || len(*s) == 0 {
		return "all the tenant's"
	}
	return strings.Join(*s, ",")
}

func defineWebhookList(fs *flag.FlagSet) func(*env, []string) error {
	var p pagination
	definePagination(fs, &p)
	return func(x *env, _ []string) error {
		limit, _, err := p.params("webhooks list")
		if err != nil {
			return err
		}
		header := true
		return p.pages(x, func(cursor *string) (*string, error) {
			resp, err := x.api.ListWebhooksWithResponse(x.ctx, &gatewayapi.ListWebhooksParams{Limit: limit, Cursor: cursor})
			if err := x.check("list webhooks", resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			var t *table
			if header {
				t, header = newTable(x.stdout, "ID", "URL", "ENABLED", "EVENT_TYPES", "SIGNERS", "CREATED"), false
			} else {
				t = newTable(x.stdout)
			}
			for _, w := range resp.JSON200.Webhooks {
				t.row(w.Id.String(), w.Url, strconv.FormatBool(w.Enabled), joinTypes(w.EventTypes), joinSigners(w.Signers), formatTime(w.CreatedAt))
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

func defineWebhookUpdate(fs *flag.FlagSet) func(*env, []string) error {
	var url, description string
	var types, signers multiFlag
	var allEvents, allSigners, enable, disable bool
	fs.StringVar(&url, "url", "", "the receiver's new https `URL` (the webhook's, not the API's)")
	fs.StringVar(&description, "description", "", "a new `TEXT`")
	fs.Var(&types, "event-type", "only this event `TYPE` (repeatable; replaces the list)")
	fs.BoolVar(&allEvents, "all-events", false, "every event type")
	fs.Var(&signers, "signer", "only this signer's events, `CHAIN_ID:ADDRESS` (repeatable; replaces the list)")
	fs.BoolVar(&allSigners, "all-signers", false, "every signer the tenant owns, now and later")
	fs.BoolVar(&enable, "enable", false, "deliver again")
	fs.BoolVar(&disable, "disable", false, "stop new deliveries")
	return func(x *env, args []string) error {
		wid, err := parseID("webhooks update", "webhook", args[0])
		if err != nil {
			return err
		}
		set := given(fs)
		switch {
		case enable && disable:
			return usagef("webhooks update", "--enable or --disable, not both")
		case len(types) > 0 && allEvents:
			return usagef("webhooks update", "--event-type or --all-events, not both")
		case len(signers) > 0 && allSigners:
			return usagef("webhooks update", "--signer or --all-signers, not both")
		}
		var body gatewayapi.WebhookUpdateRequest
		if set["url"] {
			body.Url = &url
		}
		if set["description"] {
			body.Description = &description
		}
		if len(types) > 0 || allEvents {
			// An empty list means every event type.
			t, err := eventTypes("webhooks update", types)
			if err != nil {
				return err
			}
			body.EventTypes = &t
		}
		if len(signers) > 0 || allSigners {
			// An empty list means every signer the tenant owns.
			s := append([]string{}, signers...)
			body.Signers = &s
		}
		if enable || disable {
			body.Enabled = &enable
		}
		if body == (gatewayapi.WebhookUpdateRequest{}) {
			return usagef("webhooks update", "webhooks update needs at least one change")
		}
		resp, err := x.api.UpdateWebhookWithResponse(x.ctx, wid, body)
		if err := x.check("update webhook "+wid.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		return printWebhook(x, resp.JSON200, nil)
	}
}

// errReceiverFailed is a test delivery the receiver did not take.
var errReceiverFailed = errors.New("the receiver did not accept the test delivery")

func runWebhookTest(x *env, wid gatewayapi.WebhookIdPath) error {
	resp, err := x.api.TestWebhookWithResponse(x.ctx, wid)
	if err := x.check("test webhook "+wid.String(), resp, err, http.StatusOK); err != nil {
		return err
	}
	r := resp.JSON200
	if x.json {
		err = x.jsonLine(resp.Body)
	} else {
		var f fields
		f.add("ok", strconv.FormatBool(r.Ok))
		if r.StatusCode != nil {
			f.add("status_code", strconv.Itoa(*r.StatusCode))
		}
		f.add("duration", (time.Duration(r.DurationMs) * time.Millisecond).String())
		f.str("error", r.Error)
		err = f.write(x.stdout)
	}
	if err != nil {
		return err
	}
	if !r.Ok {
		return errReceiverFailed
	}
	return nil
}

func defineWebhookDeliveries(fs *flag.FlagSet) func(*env, []string) error {
	var status string
	var p pagination
	fs.StringVar(&status, "status", "", "only deliveries in this `STATUS`: pending, delivered or dead")
	definePagination(fs, &p)
	return func(x *env, args []string) error {
		wid, err := parseID("webhooks deliveries", "webhook", args[0])
		if err != nil {
			return err
		}
		params := &gatewayapi.ListWebhookDeliveriesParams{}
		if status != "" {
			s, err := enumFlag("webhooks deliveries", "status", status, gatewayapi.WebhookDeliveryStatus.Valid,
				gatewayapi.Pending, gatewayapi.Delivered, gatewayapi.Dead)
			if err != nil {
				return err
			}
			params.Status = &s
		}
		if params.Limit, _, err = p.params("webhooks deliveries"); err != nil {
			return err
		}
		header := true
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListWebhookDeliveriesWithResponse(x.ctx, wid, params)
			if err := x.check("list the deliveries of webhook "+wid.String(), resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			var t *table
			if header {
				t, header = newTable(x.stdout, "ID", "SEQ", "EVENT", "TX_ID", "STATUS", "ATTEMPTS", "LAST", "NEXT_ATTEMPT", "CREATED"), false
			} else {
				t = newTable(x.stdout)
			}
			for _, d := range resp.JSON200.Deliveries {
				last := ""
				if d.LastStatusCode != nil {
					last = strconv.Itoa(*d.LastStatusCode)
				}
				if d.LastError != nil {
					last = strings.TrimSpace(last + " " + *d.LastError)
				}
				t.row(d.Id.String(), strconv.FormatInt(d.EventSeq, 10), d.EventType, d.TxId.String(), string(d.Status),
					strconv.Itoa(len(d.Attempts)), last, formatTimePtr(d.NextAttemptAt), formatTime(d.CreatedAt))
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

func defineWebhookReplay(fs *flag.FlagSet) func(*env, []string) error {
	var fromSeq int64
	fs.Int64Var(&fromSeq, "from-seq", 0, "replay the events from this `SEQ` on (required, 1 or more)")
	return func(x *env, args []string) error {
		wid, err := parseID("webhooks replay", "webhook", args[0])
		if err != nil {
			return err
		}
		if !given(fs)["from-seq"] || fromSeq < 1 {
			return usagef("webhooks replay", "webhooks replay needs --from-seq, 1 or more")
		}
		// The gateway replays a page per call and names where the next
		// continues; follow it to the end, one line per page.
		for from := fromSeq; ; {
			resp, err := x.api.ReplayWebhookWithResponse(x.ctx, wid, gatewayapi.WebhookReplayRequest{FromSeq: from})
			if err := x.check("replay webhook "+wid.String(), resp, err, http.StatusAccepted); err != nil {
				if from != fromSeq {
					return fmt.Errorf("%w (events before seq %d are queued; go on with --from-seq %d)", err, from, from)
				}
				return err
			}
			page := resp.JSON202
			if x.json {
				err = x.jsonLine(resp.Body)
			} else {
				_, err = fmt.Fprintf(x.stdout, "queued %d deliveries of webhook %s from seq %d through %d\n", page.Queued, wid, page.FromSeq, page.ThroughSeq)
			}
			if err != nil || page.NextFromSeq == nil {
				return err
			}
			from = *page.NextFromSeq
		}
	}
}

func defineWebhookRotate(fs *flag.FlagSet) func(*env, []string) error {
	var grace time.Duration
	fs.DurationVar(&grace, "grace", 24*time.Hour, "how long the old secrets keep signing, up to 168h; 0 ends them now")
	return func(x *env, args []string) error {
		wid, err := parseID("webhooks rotate-secret", "webhook", args[0])
		if err != nil {
			return err
		}
		body := gatewayapi.WebhookRotateRequest{}
		if given(fs)["grace"] {
			if grace < 0 || grace%time.Second != 0 {
				return usagef("webhooks rotate-secret", "--grace %s: want whole seconds, 0 or more", grace)
			}
			s := int(grace / time.Second)
			body.GraceSeconds = &s
		}
		resp, err := x.api.RotateWebhookSecretWithResponse(x.ctx, wid, body)
		if err := x.check("rotate the secret of webhook "+wid.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		return printWebhook(x, &resp.JSON200.Webhook, func(f *fields) {
			f.add("secret", resp.JSON200.Secret+"   (shown only now: store it)")
		})
	}
}

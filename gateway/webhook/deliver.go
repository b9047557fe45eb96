package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/gateway"
)

// UserAgent names txfence to receivers, so that they can tell its
// deliveries apart in their logs.
const UserAgent = "txfence-webhooks/1"

const (
	// maxResponseRead is how much of an answer's body is read: enough to
	// reuse the connection after a short answer and to quote an error,
	// never enough for a receiver to make the gateway buffer much.
	maxResponseRead = 4 << 10
	// maxQuoted is how much of a failed answer's body the log keeps.
	maxQuoted = 200
)

// work claims due deliveries and attempts them until ctx ends.
func (d *Dispatcher) work(ctx context.Context, worker int) error {
	failures := 0
	for ctx.Err() == nil {
		c, err := d.store.ClaimDelivery(ctx, d.lease)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			wait := retryDelay(failures)
			d.log.Warn("webhook worker: claim a delivery", "worker", worker, "err", err, "failures", failures, "retry_in", wait)
			pause(ctx, wait)
			continue
		}
		failures = 0
		if c == nil {
			d.idle(ctx)
			continue
		}
		d.attempt(ctx, c)
	}
	return nil
}

// idle waits until this node queues deliveries, PollInterval passes, or
// ctx ends.
func (d *Dispatcher) idle(ctx context.Context) {
	t := time.NewTimer(d.opts.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-d.wake:
	case <-t.C:
	}
}

// attempt sends one claimed delivery and records the outcome. It runs to
// its end even when ctx ends (the request is bounded by Options.Timeout),
// so that a stopping node records what it sent instead of leaving it to be
// sent again.
func (d *Dispatcher) attempt(ctx context.Context, c *gateway.DeliveryClaim) {
	ctx = context.WithoutCancel(ctx)
	log := d.log.With("delivery_id", c.DeliveryID, "subscription_id", c.SubscriptionID, "tenant_id", c.Tenant,
		"event_seq", c.EventSeq, "event_id", c.EventID, "tx_id", c.TxID)
	res := d.send(ctx, c.URL, c.EventID, c.Body, c.Secrets)
	d.metrics.attemptSeconds.Observe(res.duration.Seconds())
	r := gateway.AttemptResult{
		At: res.at, Duration: res.duration, StatusCode: res.statusCode, Error: res.err, Delivered: res.delivered,
		RetryIn: d.retryIn(c.Attempts + 1), DeadAfter: d.opts.DeadAfter,
	}
	rctx, cancel := context.WithTimeout(ctx, d.opts.Timeout+5*time.Second)
	defer cancel()
	status, err := d.store.RecordAttempt(rctx, c, r)
	switch {
	case errors.Is(err, gateway.ErrClaimLost):
		// Replayed, taken over or deleted meanwhile: whoever holds it now
		// decides; the receiver may see this event again, which
		// at-least-once allows.
		d.metrics.outcomes.WithLabelValues("lost").Inc()
		log.Info("webhook attempt not recorded: the delivery's claim was lost", "delivered", res.delivered)
	case err != nil:
		d.metrics.outcomes.WithLabelValues("unrecorded").Inc()
		log.Warn("webhook attempt not recorded; the delivery is retried when its claim lapses", "delivered", res.delivered, "err", err)
	case status == gateway.DeliveryDelivered:
		d.metrics.outcomes.WithLabelValues("delivered").Inc()
		log.Debug("webhook delivered", "status_code", res.statusCode, "attempts", c.Attempts+1)
	case status == gateway.DeliveryDead:
		d.metrics.outcomes.WithLabelValues("dead").Inc()
		d.metrics.deadLetters.Inc()
		log.Error("webhook delivery is dead: no more retries; replay it once the receiver is fixed", "alert", true,
			"attempts", c.Attempts+1, "status_code", res.statusCode, "err", res.err, "dead_after", d.opts.DeadAfter)
	default:
		// Debug: a receiver that is down fails every delivery, and the
		// metric and the delivery log say so without a line per attempt.
		d.metrics.outcomes.WithLabelValues("retry").Inc()
		log.Debug("webhook attempt failed; retrying", "attempts", c.Attempts+1, "status_code", res.statusCode, "err", res.err,
			"retry_in", r.RetryIn)
	}
}

// retryIn is the wait before the attempt after attempt n (1, 2, …):
// exponential backoff with full jitter, so that a receiver coming back
// after an outage is not hit by every delivery at once.
func (d *Dispatcher) retryIn(n int) time.Duration {
	ceiling := d.opts.BackoffBase
	for i := 1; i < n && ceiling < d.opts.BackoffMax; i++ {
		ceiling *= 2
	}
	return rand.N(min(ceiling, d.opts.BackoffMax))
}

// sent is what one attempt came to.
type sent struct {
	at         time.Time
	duration   time.Duration
	statusCode int
	delivered  bool
	err        string
}

// send POSTs body to target as event id, signed with every secret, and
// reports the answer.
func (d *Dispatcher) send(ctx context.Context, target, id string, body []byte, secrets []gateway.WebhookSecret) sent {
	res := sent{at: time.Now()}
	signature, err := sign(id, res.at, body, secrets)
	if err != nil {
		res.err = err.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		res.err = "bad URL: " + err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(res.at.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, signature)
	resp, err := d.client.Do(req)
	if err != nil {
		res.duration = time.Since(res.at)
		res.err = d.describe(err)
		return res
	}
	quoted, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))
	resp.Body.Close()
	res.duration = time.Since(res.at)
	res.statusCode = resp.StatusCode
	res.delivered = resp.StatusCode >= 200 && resp.StatusCode < 300
	if !res.delivered {
		res.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
		if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
			res.err += " (redirects are not followed; update the URL): to " + loc
		}
		if q := strings.TrimSpace(string(quoted[:min(len(quoted), maxQuoted)])); q != "" {
			res.err += ": " + q
		}
		if readErr != nil {
			res.err += " (reading the answer: " + d.describe(readErr) + ")"
		}
	}
	return res
}

// describe words a transport error for the delivery log.
func (d *Dispatcher) describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", d.opts.Timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is the subscription's: no need to repeat it
	}
	return err.Error()
}

// sign is the webhook-signature header: a "v1,<base64>" HMAC-SHA256 of
// "<id>.<timestamp>.<body>" per secret, space-separated, so that a
// receiver holding any one of them (old or new during a rotation) can
// verify.
func sign(id string, at time.Time, body []byte, secrets []gateway.WebhookSecret) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("the subscription has no unexpired signing secret")
	}
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(string(s))
		if err != nil {
			// The library's error names the bad byte, not the secret.
			return "", fmt.Errorf("a signing secret is malformed: %w", err)
		}
		if sigs[i], err = wh.Sign(id, at, body); err != nil {
			return "", fmt.Errorf("sign: %w", err)
		}
	}
	return strings.Join(sigs, " "), nil
}

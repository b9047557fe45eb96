package gateway

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/ethereum/go-ethereum/common"
)

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"   // to be attempted, or being retried
	DeliveryDelivered DeliveryStatus = "delivered" // the receiver answered 2xx
	DeliveryDead      DeliveryStatus = "dead"      // retried past the horizon: the dead letter queue, replayable
)

// Delivery is one event to deliver to one subscription, with its log.
type Delivery struct {
	ID             uuid.UUID      `json:"id"`
	SubscriptionID uuid.UUID      `json:"subscription_id"`
	EventSeq       uint64         `json:"event_seq"`
	EventID        string         `json:"event_id"`
	EventType      string         `json:"event_type"`
	TxID           string         `json:"tx_id"`
	Status         DeliveryStatus `json:"status"`
	// Attempts counts the attempts since the delivery was queued or last
	// replayed; AttemptLog keeps them all.
	Attempts int `json:"attempts"`
	// NextAttemptAt is when a pending delivery is due; nil otherwise.
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	FirstAttemptAt *time.Time `json:"first_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	// AttemptLog is the latest attempts (at most 50), newest first, kept
	// across replays.
	AttemptLog []DeliveryAttempt `json:"attempt_log"`
}

// DeliveryAttempt is one HTTP attempt of a delivery.
type DeliveryAttempt struct {
	At time.Time `json:"at"`
	// StatusCode is nil when no answer came (timeout, connection error).
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
	DurationMS int64   `json:"duration_ms"`
}

// DeliveryFilter selects a page of a subscription's delivery log.
type DeliveryFilter struct {
	// Status keeps deliveries with this status; "" keeps all.
	Status DeliveryStatus
	// Cursor is the previous page's next cursor; "" for the first page.
	Cursor string
	// Limit is the page size, 1 to 1000; 0 means 100.
	Limit int
}

// FeedEvent is one event of txmanager's feed as the dispatcher stores it.
type FeedEvent struct {
	Seq     uint64
	ID      string
	Type    string
	TxID    string
	ChainID uint64
	Signer  common.Address
	// Body is the event envelope as the feed gave it: every delivery of
	// the event sends and signs exactly these bytes.
	Body []byte
}

// DeliveryClaim is a delivery a worker has claimed to attempt, with what
// the attempt needs.
type DeliveryClaim struct {
	Token          uuid.UUID
	DeliveryID     uuid.UUID
	SubscriptionID uuid.UUID
	Tenant         uuid.UUID
	EventSeq       uint64
	EventID        string
	EventType      string
	TxID           string
	// Attempts made before this one.
	Attempts int
	URL      string
	// Secrets sign the attempt: every unexpired one, newest first.
	Secrets []WebhookSecret
	Body    []byte
}

// AttemptResult is the outcome of one HTTP attempt.
type AttemptResult struct {
	// At is when the attempt started (the webhook-timestamp it carried).
	At       time.Time
	Duration time.Duration
	// StatusCode is the answer's status, 0 when none came.
	StatusCode int
	// Error says what went wrong; "" on success. Long texts are cut.
	Error string
	// Delivered: the receiver answered 2xx.
	Delivered bool
	// RetryIn is when to try again after a failure.
	RetryIn time.Duration
	// DeadAfter is the dead letter horizon: a failure this long after the
	// first attempt sends the delivery to the dead letter queue.
	DeadAfter time.Duration
}

// ErrClaimLost: the delivery was no longer claimed by the caller (its
// lease ended and another node took it, it was replayed, or its
// subscription was deleted), so the attempt's result was not recorded.
var ErrClaimLost = errors.New("the webhook delivery's claim was lost")

package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// WebhookEventTypes are the event types a subscription may name in its
// filter (the EventType enum of openapi/components.yaml).
var WebhookEventTypes = []string{"tx.state_changed", "tx.attempt", "tx.confirmation", "tx.reorged"}

// URLRule says which webhook URLs a deployment accepts.
type URLRule uint8

// The URL rules.
const (
	// PublicHTTPS, for production: https to a public host only, so that a
	// tenant cannot aim the gateway at the deployment's own network.
	PublicHTTPS URLRule = iota
	// AnyHTTP, for development and tests: plain http too, and loopback or
	// private hosts.
	AnyHTTP
)

// Limits of a subscription's fields.
const (
	MaxWebhookURL         = 2048
	MaxWebhookDescription = 500
	// MaxSecretGrace bounds how long a replaced secret keeps signing: a
	// rotation is meant to end.
	MaxSecretGrace = 7 * 24 * time.Hour
)

// WebhookSecret is a subscription's signing secret: "whsec_" and the
// standard base64 of 32 random bytes, the Standard Webhooks format. It is
// shown to the tenant once, when made, and never logged.
type WebhookSecret string

// LogValue keeps the secret out of logs.
func (WebhookSecret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

const webhookSecretPrefix = "whsec_"

// NewWebhookSecret makes a signing secret.
func NewWebhookSecret() (WebhookSecret, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return WebhookSecret(webhookSecretPrefix + base64.StdEncoding.EncodeToString(b)), nil
}

// NewSubscription is what a subscription is made with.
type NewSubscription struct {
	URL         string `json:"url"`
	Description string `json:"description"`
	// EventTypes filters by event type; empty: every type, including types
	// added later.
	EventTypes []string `json:"event_types"`
	// Signers filters by signer, each "chain_id:0xaddress" and owned by the
	// tenant; empty: every signer the tenant owns, now and later.
	Signers []string `json:"signers"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled"`
}

// SubscriptionPatch changes a subscription: nil fields stay as they are.
type SubscriptionPatch struct {
	URL         *string `json:"url"`
	Description *string `json:"description"`
	// EventTypes replaces the filter; an empty list means every type.
	EventTypes *[]string `json:"event_types"`
	// Signers replaces the filter; an empty list means every signer.
	Signers *[]string `json:"signers"`
	Enabled *bool     `json:"enabled"`
}

// Subscription is a stored webhook subscription, without its secrets'
// values.
type Subscription struct {
	ID          uuid.UUID `json:"id"`
	Tenant      uuid.UUID `json:"-"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	// EventTypes is never nil; empty means every type.
	EventTypes []string `json:"event_types"`
	// Signers is nil (JSON null) for every signer the tenant owns.
	Signers   []string             `json:"signers"`
	Enabled   bool                 `json:"enabled"`
	Secrets   []SubscriptionSecret `json:"secrets"`
	CreatedAt time.Time            `json:"created_at"`
	UpdatedAt time.Time            `json:"updated_at"`
}

// SubscriptionSecret describes one signing secret, not its value.
type SubscriptionSecret struct {
	ID        uuid.UUID `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when a replaced secret stops signing; nil while it is
	// the current one.
	ExpiresAt *time.Time `json:"expires_at"`
}

// PageLimit applies the API's page size rules.
func PageLimit(limit int) (int, *errs.FieldError) {
	switch {
	case limit == 0:
		return 100, nil
	case limit < 1 || limit > 1000:
		return 0, &errs.FieldError{Pointer: "limit", Detail: "1 to 1000"}
	}
	return limit, nil
}

// CheckWebhookURL checks a webhook URL under rule and returns it
// normalized; a bad one is errs.Invalid naming the field /url. Creating or
// changing a subscription checks its URL this way.
func CheckWebhookURL(raw string, rule URLRule) (string, error) {
	u, problem := CheckSubscriptionURL(raw, rule)
	if problem != "" {
		return "", InvalidSubscription([]errs.FieldError{{Pointer: "/url", Detail: problem}})
	}
	return u, nil
}

// CheckSubscriptionURL checks a webhook URL under rule and returns it
// normalized, or what is wrong with it.
func CheckSubscriptionURL(raw string, rule URLRule) (string, string) {
	if raw == "" {
		return "", "required"
	}
	if len(raw) > MaxWebhookURL {
		return "", fmt.Sprintf("at most %d characters", MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "not a URL"
	}
	switch {
	case !u.IsAbs() || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "", "an absolute http(s) URL"
	case u.Scheme == "http" && rule != AnyHTTP:
		return "", "https is required"
	case u.User != nil:
		return "", "credentials in the URL are not allowed (receivers check the signature)"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", "a fragment is not allowed"
	case u.Hostname() == "":
		return "", "a host is required"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "the port must be 1 to 65535"
		}
	}
	if rule != AnyHTTP {
		host := strings.ToLower(u.Hostname())
		if ip, err := netip.ParseAddr(host); err == nil {
			if !PublicIP(ip) {
				return "", "the host must be a public address"
			}
		} else if !strings.Contains(host, ".") || host == "localhost" || strings.HasSuffix(host, ".localhost") ||
			strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".internal") || strings.HasSuffix(host, ".") {
			return "", "the host must be a public DNS name"
		}
	}
	out := u.String()
	if len(out) > MaxWebhookURL {
		return "", fmt.Sprintf("at most %d characters", MaxWebhookURL)
	}
	return out, ""
}

// nonPublic lists the special-purpose ranges (RFC 6890 and IANA's IPv4
// and IPv6 special-purpose address registries) that IsGlobalUnicast and
// IsPrivate let through: shared address space, IETF protocol assignments,
// documentation, benchmarking, deprecated relays, reserved space, and IPv6
// tunnelling prefixes that can embed a private IPv4 address. A few anycast services in these ranges are
// globally reachable; no webhook receiver lives there.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("2001::/23"), // Teredo, benchmarking, ORCHID and other protocol assignments
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("3fff::/20"),
}

// globalIPv6 is the only IPv6 space allocated for global unicast; the
// rest (translation prefixes, discard, SRv6 SIDs, ULA, link- and
// site-local) is not.
var globalIPv6 = netip.MustParsePrefix("2000::/3")

// PublicIP reports whether ip is a globally routable unicast address.
// Webhook URLs naming an address, and every address a delivery connects
// to, must be one unless the deployment allows insecure URLs: otherwise a
// tenant could make the gateway call the deployment's own network.
func PublicIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || (ip.Is6() && !globalIPv6.Contains(ip)) {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// CheckEventTypes returns the filter sorted without duplicates.
func CheckEventTypes(types []string, fields *[]errs.FieldError) []string {
	out := []string{}
	for i, t := range types {
		if !slices.Contains(WebhookEventTypes, t) {
			*fields = append(*fields, errs.FieldError{Pointer: fmt.Sprintf("/event_types/%d", i),
				Detail: fmt.Sprintf("%q is not an event type (%s)", t, strings.Join(WebhookEventTypes, ", "))})
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckSigners parses the filter (empty: every signer, nil out) and
// returns it normalized and deduplicated; ownership is checked apart.
func CheckSigners(signers []string, fields *[]errs.FieldError) ([]string, []SignerRef) {
	if len(signers) == 0 {
		return nil, nil
	}
	var refs []SignerRef
	for i, s := range signers {
		ref, err := ParseSignerRef(s)
		if err != nil {
			*fields = append(*fields, errs.FieldError{Pointer: fmt.Sprintf("/signers/%d", i), Detail: fmt.Sprintf("%q is not chain_id:0xaddress", s)})
			continue
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return SignerStrings(refs), refs
}

// CheckDescription adds a field error unless d is a short enough text.
func CheckDescription(d string, fields *[]errs.FieldError) {
	if utf8.RuneCountInString(d) > MaxWebhookDescription || !utf8.ValidString(d) || strings.ContainsRune(d, 0) {
		*fields = append(*fields, errs.FieldError{Pointer: "/description", Detail: fmt.Sprintf("at most %d characters of text", MaxWebhookDescription)})
	}
}

// InvalidSubscription is the error for fields that failed their checks.
func InvalidSubscription(fields []errs.FieldError) error {
	details := make([]string, len(fields))
	for i, f := range fields {
		details[i] = strings.TrimPrefix(f.Pointer, "/") + ": " + f.Detail
	}
	return errs.InvalidFields("invalid webhook subscription: "+strings.Join(details, "; "), fields...)
}

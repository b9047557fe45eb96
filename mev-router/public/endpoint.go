package public

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Endpoint is a named URL from the configuration: a public RPC endpoint or
// a private relay. The name labels metrics, logs and answers, so that no
// URL (which often carries an API key) leaves the process.
type Endpoint struct {
	Name string
	URL  string
}

// String shows the name and the URL's scheme and host only.
func (e Endpoint) String() string {
	u, err := url.Parse(e.URL)
	if err != nil {
		return e.Name
	}
	return e.Name + "=" + u.Scheme + "://" + u.Host
}

// Endpoints is a list of endpoints written `name=url,name=url`; a URL
// without a name is named after its host.
type Endpoints []Endpoint

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

// UnmarshalText parses the configuration form, refusing duplicate names and
// anything but http(s) and ws(s) URLs.
func (es *Endpoints) UnmarshalText(text []byte) error {
	var out Endpoints
	seen := map[string]bool{}
	var problems []error
	for item := range strings.SplitSeq(string(text), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, raw, named := strings.Cut(item, "=")
		if !named || strings.Contains(name, "://") {
			name, raw = "", item
		}
		if CheckURL(raw) != nil {
			problems = append(problems, fmt.Errorf("%q: want name=http(s)://host[/path]", redact(item)))
			continue
		}
		if name == "" {
			u, _ := url.Parse(raw)
			name = u.Hostname()
		}
		if err := CheckName(name); err != nil {
			problems = append(problems, err)
			continue
		}
		if seen[name] {
			problems = append(problems, fmt.Errorf("%q named twice", name))
			continue
		}
		seen[name] = true
		out = append(out, Endpoint{Name: name, URL: raw})
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	*es = out
	return nil
}

// CheckName checks an endpoint's or a relay's name: it labels metrics and
// answers, so it is short and plain.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%q: a name is 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// CheckURL checks an endpoint's or a relay's URL: http(s) or ws(s), with a
// host. Its error never quotes the URL, which may carry an API key.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
		return fmt.Errorf("%q: want http(s)://host[/path] or ws(s)://host[/path]", redact(raw))
	}
	return nil
}

// String lists the endpoints without their paths or credentials, for the
// start-up configuration dump.
func (es Endpoints) String() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

// Names lists the endpoints' names.
func (es Endpoints) Names() []string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name
	}
	return names
}

// redact keeps a bad item's scheme and host at most, for error messages.
func redact(item string) string {
	if u, err := url.Parse(item); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	if len(item) > 24 {
		return item[:24] + "…"
	}
	return item
}

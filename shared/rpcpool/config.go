package rpcpool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// UnmarshalJSON reads an endpoint as a chains file gives it: a URL alone
// (named after its host, weight 1, no budget), or an object
//
//	{"name": "alchemy", "url": "https://…", "weight": 2, "rps": 25,
//	 "credits": {"units": 300000000, "period": "720h", "default": 20,
//	             "cost": {"eth_getLogs": 75, "eth_call": 26}}}
func (e *Endpoint) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var u string
		if err := json.Unmarshal(b, &u); err != nil {
			return err
		}
		*e = Endpoint{URL: u}
		return e.check()
	}
	var raw struct {
		Name    string  `json:"name"`
		URL     string  `json:"url"`
		Weight  int     `json:"weight"`
		RPS     float64 `json:"rps"`
		Credits *struct {
			Units   int64            `json:"units"`
			Period  string           `json:"period"`
			Cost    map[string]int64 `json:"cost"`
			Default int64            `json:"default"`
		} `json:"credits"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("an endpoint is a URL or {name, url, weight, rps, credits}: %w", err)
	}
	*e = Endpoint{Name: raw.Name, URL: raw.URL, Weight: raw.Weight, RPS: raw.RPS}
	if c := raw.Credits; c != nil {
		period, err := time.ParseDuration(c.Period)
		if err != nil {
			return fmt.Errorf("endpoint %s: credits.period: %w", e.label(), err)
		}
		e.Credits = &Credits{Units: c.Units, Period: period, Cost: c.Cost, Default: c.Default}
	}
	return e.check()
}

// MarshalJSON writes the object form, which UnmarshalJSON reads back.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type credits struct {
		Units   int64            `json:"units"`
		Period  string           `json:"period"`
		Cost    map[string]int64 `json:"cost,omitempty"`
		Default int64            `json:"default,omitempty"`
	}
	out := struct {
		Name    string   `json:"name"`
		URL     string   `json:"url"`
		Weight  int      `json:"weight,omitempty"`
		RPS     float64  `json:"rps,omitempty"`
		Credits *credits `json:"credits,omitempty"`
	}{Name: e.Name, URL: e.URL, Weight: e.Weight, RPS: e.RPS}
	if c := e.Credits; c != nil {
		out.Credits = &credits{Units: c.Units, Period: c.Period.String(), Cost: c.Cost, Default: c.Default}
	}
	return json.Marshal(out)
}

// check refuses what no pool could use, and names an endpoint after its
// host when the file gives no name.
func (e *Endpoint) check() error {
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("endpoint %s: url: want http(s):// or ws(s):// with a host", e.label())
	}
	if e.Name == "" {
		e.Name = u.Host
	}
	switch {
	case e.Weight < 0, e.RPS < 0:
		return fmt.Errorf("endpoint %s: weight and rps may not be negative", e.Name)
	case e.Credits != nil && (e.Credits.Units <= 0 || e.Credits.Period <= 0 || e.Credits.Default < 0):
		return fmt.Errorf("endpoint %s: credits need positive units and period", e.Name)
	}
	if e.Credits != nil {
		for method, cost := range e.Credits.Cost {
			if cost < 0 {
				return fmt.Errorf("endpoint %s: credits.cost.%s may not be negative", e.Name, method)
			}
		}
	}
	return nil
}

// label names an endpoint in an error without its URL's path or query,
// where providers put their API keys.
func (e *Endpoint) label() string {
	if e.Name != "" {
		return e.Name
	}
	if u, err := url.Parse(e.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return "(unnamed)"
}

// URLs is the endpoints a chains file listing bare URLs gives: each
// named after its host, weight 1, no budget. A URL no pool can use is
// left for New to refuse.
func URLs(urls ...string) []Endpoint {
	out := make([]Endpoint, len(urls))
	for i, u := range urls {
		out[i] = Endpoint{URL: u}
		_ = out[i].check()
	}
	return out
}

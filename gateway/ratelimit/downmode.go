package ratelimit

import "fmt"

// DownMode says how a Limiter answers while Redis cannot be reached. It
// parses from configuration as "local", "allow" or "deny".
type DownMode uint8

// The modes. The zero value is DownLocal, the default.
const (
	// DownLocal counts in this process with the same limits, so each
	// gateway node limits on its own: a key may get one burst per node.
	DownLocal DownMode = iota
	// DownAllow lets every request through: availability over limits.
	DownAllow
	// DownDeny refuses every request with an errs.Unavailable error (503):
	// limits over availability.
	DownDeny
)

var downModeNames = [...]string{DownLocal: "local", DownAllow: "allow", DownDeny: "deny"}

// String returns the mode's configuration name.
func (m DownMode) String() string {
	if int(m) < len(downModeNames) {
		return downModeNames[m]
	}
	return fmt.Sprintf("DownMode(%d)", m)
}

// ParseDownMode parses a configuration value; the empty string is the
// default, DownLocal.
func ParseDownMode(s string) (DownMode, error) {
	if s == "" {
		return DownLocal, nil
	}
	for m, name := range downModeNames {
		if name == s {
			return DownMode(m), nil
		}
	}
	return DownLocal, fmt.Errorf("unknown mode %q for when Redis is down: want local, allow or deny", s)
}

// MarshalText returns the mode's configuration name.
func (m DownMode) MarshalText() ([]byte, error) {
	if int(m) >= len(downModeNames) {
		return nil, fmt.Errorf("ratelimit: unknown DownMode %d", m)
	}
	return []byte(m.String()), nil
}

// UnmarshalText parses a configuration value, so that shared/config can
// fill a DownMode field from the environment.
func (m *DownMode) UnmarshalText(text []byte) error {
	v, err := ParseDownMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

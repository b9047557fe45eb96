package ledgertest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Logs is a log destination for a slog JSON handler that the code under
// test and the test may share: safe for concurrent writers.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Alerts are the records logged as alerts ("alert": true) so far, decoded.
func (l *Logs) Alerts(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["alert"] == true {
			out = append(out, rec)
		}
	}
	return out
}

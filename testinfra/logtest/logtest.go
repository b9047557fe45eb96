// Package logtest holds what tests use to read what a component logs or
// prints while it runs.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a log sink (or a process's output) that many goroutines may
// write while the test reads it: a bytes.Buffer is not safe for that, and
// the race detector says so.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Records are the JSON records logged so far for which match holds,
// decoded; a line that is not JSON fails the test.
func (b *Buffer) Records(t testing.TB, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// Alerts are the records logged as alerts ("alert": true, what every
// service adds to a record an operator must act on) so far.
func (b *Buffer) Alerts(t testing.TB) []map[string]any {
	t.Helper()
	return b.Records(t, func(rec map[string]any) bool { return rec["alert"] == true })
}

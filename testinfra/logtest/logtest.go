// Package logtest holds what tests use to read what a component logs or
// prints while it runs.
package logtest

import (
	"bytes"
	"sync"
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

package vault

import "time"

// SetClock replaces b's clock, which decides how long a vouched-for key is
// served from memory, so tests step past HealthInterval without waiting.
func SetClock(b *Backend, now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = now
}

// KeyFromBytes is keyFromBytes, for the test that it clears its input.
var KeyFromBytes = keyFromBytes

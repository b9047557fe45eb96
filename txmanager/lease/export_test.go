package lease

import "time"

// DriveByHand makes m run a round only when ticks delivers, and tell
// rounds when each round is over. Call it before Run.
func DriveByHand(m *Manager, ticks <-chan time.Time, rounds chan<- struct{}) {
	m.ticks, m.rounds = ticks, rounds
}

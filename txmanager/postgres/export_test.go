package postgres

// HoldCreates keeps every create queued until release: a test can then
// gather a batch of the creates it wants. queued reports how many wait.
func HoldCreates(s *Store) (queued func() int, release func()) {
	s.creates.Pause()
	return s.creates.Len, s.creates.Resume
}

package postgres

// HoldPosts keeps every posting queued until release: a test can then
// gather a batch of its choosing. queued reports how many wait.
func HoldPosts(s *Store) (queued func() int, release func()) {
	s.posts.Pause()
	return s.posts.Len, s.posts.Resume
}

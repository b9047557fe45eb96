package postgres

import (
	"strconv"

	"github.com/txfence/txfence/txmanager"
)

// HoldCreates keeps every create queued until release: a test can then
// gather a batch of the creates it wants. queued reports how many wait.
func HoldCreates(s *Store) (queued func() int, release func()) {
	s.creates.Pause()
	return s.creates.Len, s.creates.Resume
}

// FenceSQL is the fence clause for a test's own statements, with its
// parameters numbered from argOffset+1, and its arguments: the function the
// store's statements hold the fence with (migration 0010), called as they
// call it. The store's own statements take the fence as $1 to $4 instead
// (see queries/lease.sql).
func FenceSQL(f txmanager.Fence, argOffset int) (sql string, args []any) {
	n := func(i int) string { return "$" + strconv.Itoa(argOffset+i) }
	sql = `(SELECT txfence_holds_lease(` + n(1) + `::bigint, ` + n(2) + `::bytea, ` + n(3) + `::text, ` + n(4) + `::bigint))`
	return sql, fenceArgs(f)
}

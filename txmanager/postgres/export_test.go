package postgres

// EventBarrier is the advisory lock event writers hold shared, for tests
// that write events by hand.
const EventBarrier = eventBarrier

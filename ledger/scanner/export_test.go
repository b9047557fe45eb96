package scanner

// SetLogCalls makes s ask for Transfer logs perCall wallets at a time, and
// for all of a block's when that takes more than maxCalls calls.
func SetLogCalls(s *Scanner, perCall, maxCalls int) {
	s.logCalls = &logCalls{perCall: perCall, maxCalls: maxCalls}
}

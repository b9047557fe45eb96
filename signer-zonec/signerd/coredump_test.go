package signerd

// The tests run signerd inside the test binary, which must stay as it was
// (debuggable, its core limit untouched): package hardening checks the
// real thing in a child process, TestServeDisablesCoreDumps in the binary.
func init() { keepCoreDumps = true }

package policy

import "encoding/json"

// Canonical re-encodes what p accepted, for tests that check an accepted
// file re-validates to the same thing.
func Canonical(p *Policy) []byte {
	b, err := json.Marshal(p.raw)
	if err != nil {
		panic(err) // rawPolicy holds only strings, numbers, bools, slices and maps
	}
	return b
}

package httpserver

import "testing"

func TestTraceIDOf(t *testing.T) {
	t.Parallel()
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		traceparent string
		want        string
	}{
		{"00-" + id + "-00f067aa0ba902b7-01", id},
		{"00-" + id + "-00f067aa0ba902b7-00", id},
		{"01-" + id + "-00f067aa0ba902b7-01-more", id}, // a later version may append fields
		{"01-" + id + "-00f067aa0ba902b7-01", id},
		{"", ""},
		{"00-" + id + "-00f067aa0ba902b7-01-more", ""}, // version 00 has four fields
		{"01-" + id + "-00f067aa0ba902b7-01more", ""},
		{"ff-" + id + "-00f067aa0ba902b7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-" + id + "-0000000000000000-01", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""}, // lowercase only
		{"00_" + id + "-00f067aa0ba902b7-01", ""},
		{"00-" + id[:31] + "-00f067aa0ba902b7-01", ""},
		{"0x-" + id + "-00f067aa0ba902b7-01", ""},
		{"00-" + id + "-00f067aa0ba902b7-0g", ""},
	} {
		got, ok := traceIDOf(tc.traceparent)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("traceIDOf(%q) = %q, %v; want %q", tc.traceparent, got, ok, tc.want)
		}
	}
}

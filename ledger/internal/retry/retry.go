// Package retry runs the ledger's long-lived workers (the feed consumer,
// the block scanners): a step that fails is retried with a growing pause,
// and a failure that lasts is raised as an alert, once.
package retry

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Pauses between failed steps grow from minPause to maxPause; a failure
// lasting alertAfter is an alert. Variables for the tests only.
var (
	minPause   = 100 * time.Millisecond
	maxPause   = 10 * time.Second
	alertAfter = time.Minute
)

// Stop marks a step's error that retrying cannot mend: Run returns it.
func Stop(err error) error { return &stop{err} }

type stop struct{ err error }

func (s *stop) Error() string { return s.err.Error() }
func (s *stop) Unwrap() error { return s.err }

// Run calls step until ctx ends, then returns nil; or until step fails
// with an error made by Stop, which it returns. A failing step is retried
// after a pause that doubles from 100 ms up to 10 s. A failure that lasts a
// minute is logged as an alert (log carries "alert": true), once, and a
// line says when the work goes on again. what names the work in those
// lines: "booking the feed".
func Run(ctx context.Context, log *slog.Logger, what string, step func(context.Context) error) error {
	pause, failingSince, alerted := time.Duration(0), time.Time{}, false
	for ctx.Err() == nil {
		err := step(ctx)
		if err == nil {
			if alerted {
				log.Info("ledger: working again", "work", what, "stalled_for", time.Since(failingSince).Round(time.Second).String())
			}
			pause, failingSince, alerted = 0, time.Time{}, false
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if s := (*stop)(nil); errors.As(err, &s) {
			return s.err
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if !alerted && time.Since(failingSince) >= alertAfter {
			log.Error("ledger: failing for a minute", "alert", true, "work", what, "err", err)
			alerted = true
		} else {
			log.Warn("ledger: failed; retrying", "work", what, "err", err)
		}
		pause = min(max(2*pause, minPause), maxPause)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
	return nil
}

package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failing step is retried until it works; a failure that lasts is one
// alert, and its end is logged.
func TestAFailureIsRetriedAndALastingOneAlertedOnce(t *testing.T) {
	minPause, maxPause, alertAfter = time.Millisecond, time.Millisecond, 0
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Run(ctx, log, "testing", func(context.Context) error {
		calls++
		switch {
		case calls <= 3:
			return errors.New("down")
		case calls == 4:
			return nil
		}
		cancel()
		return errors.New("cancelled")
	})
	if err != nil || calls != 5 {
		t.Fatalf("Run = %v after %d calls, want nil after 5", err, calls)
	}
	logged := out.String()
	if n := strings.Count(logged, "alert=true"); n != 1 {
		t.Errorf("%d alerts, want one:\n%s", n, logged)
	}
	if !strings.Contains(logged, "working again") || strings.Count(logged, "failed; retrying") != 2 {
		t.Errorf("want two retries, an alert and a recovery:\n%s", logged)
	}
}

func TestAStopEndsRun(t *testing.T) {
	minPause, maxPause, alertAfter = time.Millisecond, time.Millisecond, time.Minute
	fatal := errors.New("fatal")
	calls := 0
	err := Run(context.Background(), slog.New(slog.DiscardHandler), "testing", func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("transient")
		}
		return Stop(fatal)
	})
	if !errors.Is(err, fatal) || calls != 2 {
		t.Errorf("Run = %v after %d calls, want the stop after 2", err, calls)
	}
}

package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is a service binary's main: it runs run until SIGINT or SIGTERM,
// then lets it shut down, and exits non-zero with the error when run fails.
func Main(binary string, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", binary, err)
		os.Exit(1)
	}
}

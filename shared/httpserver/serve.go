package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
)

// Listener is one address a service serves on.
type Listener struct {
	// Name tells operators which listener this is ("internal", "public", "ops").
	Name    string
	Addr    string
	TLS     *tls.Config // nil serves plain HTTP
	Handler http.Handler
}

// Serve binds every listener first, so a taken port fails the start before
// anything is served, logs a "listening" line per listener with its actual
// address (port 0 picks a free one; tests and the local stack read it from
// that line), and serves until ctx ends. Then it stops accepting, lets
// in-flight requests finish within shutdownTimeout, and closes whatever is
// left.
func Serve(ctx context.Context, log *slog.Logger, shutdownTimeout time.Duration, listeners ...Listener) error {
	var bound []net.Listener
	closeAll := func() {
		for _, ln := range bound {
			_ = ln.Close()
		}
	}
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("%s listener on %s: %w", l.Name, l.Addr, err)
		}
		bound = append(bound, ln)
	}

	g, gctx := errgroup.WithContext(ctx)
	servers := make([]*http.Server, len(listeners))
	for i, l := range listeners {
		srv := &http.Server{
			Handler:           l.Handler,
			TLSConfig:         l.TLS,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
		servers[i] = srv
		ln := bound[i]
		scheme := "http"
		if l.TLS != nil {
			scheme = "https"
		}
		log.Info("listening", "listener", l.Name, "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String())
		g.Go(func() error {
			var err error
			if l.TLS != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("%s listener: %w", l.Name, err)
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down", "timeout", shutdownTimeout.String())
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		var errsList []error
		for _, srv := range servers {
			if err := srv.Shutdown(sctx); err != nil {
				errsList = append(errsList, err)
				_ = srv.Close()
			}
		}
		if len(errsList) > 0 {
			return fmt.Errorf("graceful shutdown incomplete: %w", errors.Join(errsList...))
		}
		return nil
	})
	return g.Wait()
}

// Package txctl is txctl, the command-line client of txfence's public API
// (openapi/gateway.yaml) for operators and scripts. Every command but
// watch goes through the generated client (openapi/gatewayapi); watch
// reads the Server-Sent Events stream itself, which that client cannot.
//
// Output is aligned text for people by default; --json prints the API's
// JSON documents as they came, one per line, for scripts. Errors go to
// standard error, and the exit status says what kind of failure it was
// (see ExitCode).
package txctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/txfence/txfence/openapi/gatewayapi"
)

// Version is txctl's version. Release builds set it with
// -ldflags "-X github.com/txfence/txfence/gateway/txctl.Version=v1.2.3";
// otherwise it comes from the build information.
var Version = ""

// Environment variables txctl reads. Only Run's getenv reads them, so tests
// pass their own.
const (
	EnvURL = "TXCTL_URL"
	EnvKey = "TXCTL_KEY"
)

// DefaultURL is the gateway's public listener in the local stack.
const DefaultURL = "http://127.0.0.1:8080"

// defaultTimeout bounds every command but watch, which follows a stream
// for as long as it is asked to.
const defaultTimeout = 30 * time.Second

// Exit statuses (ExitCode).
const (
	exitOK = 0
	// exitError: the API refused or failed, or could not be reached.
	exitError = 1
	// exitUsage: the command line is wrong; nothing was sent.
	exitUsage = 2
	// exitTxFailed: watch --until-final saw the transaction end without
	// the effect it asked for (REVERTED or FAILED).
	exitTxFailed = 3
)

// ExitCode is the process exit status for an error Run returned: 0 for
// nil, 2 for a usage error, 3 when watch --until-final saw the
// transaction end REVERTED or FAILED, 1 for anything else (an API
// problem, a connection that failed, a timeout).
func ExitCode(err error) int {
	var u *usageError
	var f *finalStateError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &f):
		return exitTxFailed
	default:
		return exitError
	}
}

// Run runs one txctl command line; args excludes the program name. It
// reports any error on stderr itself and returns it for ExitCode.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := run(ctx, args, getenv, stdin, stdout, stderr)
	if err != nil {
		report(stderr, err)
	}
	return err
}

// globals are the flags that come before the command.
type globals struct {
	url     string
	key     string
	json    bool
	timeout time.Duration
	// timeoutSet tells a --timeout given from the default, which depends
	// on the command.
	timeoutSet bool
}

func defineGlobals(fs *flag.FlagSet, g *globals) {
	fs.StringVar(&g.url, "url", "", "")
	fs.StringVar(&g.key, "key", "", "")
	fs.BoolVar(&g.json, "json", false, "")
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "")
}

// globalFlags names the global flags, to tell a user who put one after
// the command where it goes.
var globalFlags = map[string]bool{"url": true, "key": true, "json": true, "timeout": true}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var g globals
	fs := flag.NewFlagSet("txctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineGlobals(fs, &g)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeHelp(stdout)
		}
		return usagef("", "%v", err)
	}
	fs.Visit(func(f *flag.Flag) { g.timeoutSet = g.timeoutSet || f.Name == "timeout" })
	args = fs.Args()
	if len(args) == 0 {
		_ = writeHelp(stderr)
		return usagef("", "no command given")
	}

	if isFamily(args[0]) && len(args) > 1 && isHelpFlag(args[1]) {
		return writeFamilyHelp(stdout, args[0])
	}
	cmd, rest, err := lookup(args)
	if err != nil {
		return err
	}
	switch cmd.name {
	case "help":
		return helpCommand(rest, stdout)
	case "version":
		if len(rest) > 0 {
			return usagef("version", "version takes no arguments")
		}
		_, err := fmt.Fprintln(stdout, "txctl", version())
		return err
	}

	cfs := flag.NewFlagSet("txctl "+cmd.name, flag.ContinueOnError)
	cfs.SetOutput(io.Discard)
	runCmd := cmd.define(cfs)
	pos, err := parseInterleaved(cfs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeCommandHelp(stdout, cmd)
		}
		return flagError(cmd, err)
	}
	if len(pos) < cmd.minArgs || (cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs) {
		return usagef(cmd.name, "%s takes %s; got %q", cmd.name, argCount(cmd), pos)
	}

	x, err := newEnv(ctx, g, getenv, cmd)
	if err != nil {
		return err
	}
	x.stdin, x.stdout, x.stderr = stdin, stdout, stderr
	x.base = x.ctx
	if x.timeout > 0 {
		var cancel context.CancelFunc
		x.ctx, cancel = context.WithTimeout(x.ctx, x.timeout)
		defer cancel()
	}
	return runCmd(x, pos)
}

// env is what a command runs with.
type env struct {
	ctx context.Context
	// base is ctx without the command's timeout, for a command that waits
	// for a person between its requests (approve).
	base context.Context
	api  *gatewayapi.ClientWithResponses
	// http sends the requests, the generated client's and the event
	// stream's.
	http    *http.Client
	baseURL string
	key     string
	json    bool
	timeout time.Duration
	cmd     *command
	now     func() time.Time
	// getenv is Run's: the only reader of the environment.
	getenv func(string) string

	stdin          io.Reader
	stdout, stderr io.Writer
}

func newEnv(ctx context.Context, g globals, getenv func(string) string, cmd *command) (*env, error) {
	base := g.url
	if base == "" {
		base = getenv(EnvURL)
	}
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("", "--url %q: want the gateway's base URL, http(s)://host[:port][/path]", base)
	}
	base = strings.TrimSuffix(u.String(), "/")

	key := g.key
	if key == "" {
		key = getenv(EnvKey)
	}
	if key == "" && !cmd.local {
		return nil, usagef("", "no API key: set %s (or pass --key before the command)", EnvKey)
	}
	if strings.ContainsAny(key, " \t\r\n") {
		return nil, usagef("", "the API key contains white space; it is one token, txf_...")
	}

	timeout := defaultTimeout
	if cmd.streams {
		timeout = 0
	}
	if g.timeoutSet {
		if g.timeout < 0 {
			return nil, usagef("", "--timeout %s: want 0 (no limit) or more", g.timeout)
		}
		timeout = g.timeout
	}

	// No client timeout: the command's context bounds requests, and the
	// event stream must outlive any fixed timeout.
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	userAgent := "txctl/" + version()
	api, err := gatewayapi.NewClientWithResponses(base, gatewayapi.WithHTTPClient(hc),
		gatewayapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("User-Agent", userAgent)
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("build the API client: %w", err)
	}
	return &env{ctx: ctx, api: api, http: hc, baseURL: base, key: key, json: g.json, timeout: timeout, cmd: cmd, now: time.Now, getenv: getenv}, nil
}

// version is Version, else the module version and revision the binary was
// built from.
func version() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

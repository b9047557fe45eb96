package txctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txctl"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	signerA = gatewaystack.SignerA
	signerB = gatewaystack.SignerB
	bob     = gatewaystack.Bob
)

// waitLimit bounds every wait of these tests: far above what anything
// takes, so that only a hang fails.
const waitLimit = 30 * time.Second

// result is what one txctl run did.
type result struct {
	stdout, stderr string
	err            error
	code           int
}

// txctlRun runs a txctl command line against url with key, as the
// environment gives them.
func txctlRun(t *testing.T, url, key string, args ...string) result {
	t.Helper()
	return txctlRunInput(t, url, key, "", args...)
}

// txctlRunInput is txctlRun with stdin as the command's standard input.
func txctlRunInput(t *testing.T, url, key, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	err := txctl.Run(context.Background(), args, testEnv(url, key), strings.NewReader(stdin), &out, &errb)
	return result{stdout: out.String(), stderr: errb.String(), err: err, code: txctl.ExitCode(err)}
}

// testEnv is txctl's environment in a test: the gateway's URL and the
// key, and the webhook secret from the process (tests set it with
// t.Setenv), nothing else from the machine's.
func testEnv(url, key string) func(string) string {
	return func(name string) string {
		switch name {
		case txctl.EnvURL:
			return url
		case txctl.EnvKey:
			return key
		case txctl.EnvWebhookSecret:
			return os.Getenv(name)
		}
		return ""
	}
}

// mustRun runs a command that must succeed.
func mustRun(t *testing.T, url, key string, args ...string) result {
	t.Helper()
	r := txctlRun(t, url, key, args...)
	if r.code != 0 {
		t.Fatalf("txctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// syncBuffer is standard output or error of a command running in the
// background: it tells waiters each time something is written.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until cond holds of what was written.
func (s *syncBuffer) waitFor(t *testing.T, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		if out := s.String(); cond(out) {
			return out
		}
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("waiting for %s; got so far:\n%s", what, s.String())
		}
	}
}

// background is a txctl command running in a goroutine.
type background struct {
	stdout, stderr *syncBuffer
	done           chan error
}

func startTxctl(t *testing.T, url, key string, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{stdout: newSyncBuffer(), stderr: newSyncBuffer(), done: make(chan error, 1)}
	go func() { b.done <- txctl.Run(ctx, args, testEnv(url, key), strings.NewReader(""), b.stdout, b.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

// wait is the command's exit code once it ends by itself.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err // for the cleanup
		return txctl.ExitCode(err)
	case <-time.After(waitLimit):
		t.Fatalf("the command did not end\nstdout: %s\nstderr: %s", b.stdout.String(), b.stderr.String())
	}
	return -1
}

// lines are the non-empty lines of s.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// conforms checks a JSON document against the schema of the answer that
// operation gives with status, in openapi/gateway.yaml. item names a
// property whose array items to check instead (events of an EventList).
func conforms(t *testing.T, doc string, path, method string, status int, item string) {
	t.Helper()
	spec, err := openapi.Load(context.Background(), openapi.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	op := spec.Paths.Find(path).GetOperation(method)
	schema := op.Responses.Status(status).Value.Content.Get("application/json").Schema.Value
	if item != "" {
		schema = schema.Properties[item].Value.Items.Value
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	if err := schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Errorf("%s %s %d: the output does not follow the schema: %v\n%s", method, path, status, err, doc)
	}
}

// decodeJSON unmarshals a line of output or fails the test.
func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, s, err)
	}
	return v
}

// rawGet reads an API document as the API sends it.
func rawGet(t *testing.T, g *gatewaystack.Gateway, key, path string) string {
	t.Helper()
	resp, b := g.Do(t, key, "GET", path, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

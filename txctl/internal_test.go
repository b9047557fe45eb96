package txctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// TestReadStream: messages count only once complete; a message cut off
// by the end of the connection is neither printed nor remembered as
// received, so resuming asks for it again.
func TestReadStream(t *testing.T) {
	watched := uuid.MustParse("0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7")
	ev := func(seq, tx string) string {
		return `{"seq":` + seq + `,"id":"evt_` + seq + `","type":"tx.state_changed","tx_id":"` + tx + `","chain_id":31337,` +
			`"signer":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","created_at":"2025-01-15T10:04:05Z","data":{"to_state":"INIT"}}`
	}
	other := "0193a1f4-8c2e-7d6b-9f10-000000000000"
	stream := ": txfence events\n\n" +
		"id: 5\nevent: tx.state_changed\ndata: " + ev("5", watched.String()) + "\n\n" +
		": keep-alive\n\nretry: 3000\n\n" +
		"id: 6\nevent: tx.state_changed\ndata: " + ev("6", other) + "\n\n" +
		// Split over two data lines, which the reader joins.
		"id: 7\nevent: tx.state_changed\ndata: " + strings.Replace(ev("7", watched.String()), `"id"`, "\ndata: \"id\"", 1) + "\n\n" +
		// Printed already (the timeline overlaps the stream): skipped.
		"id: 4\ndata: " + ev("4", watched.String()) + "\n\n" +
		"id: 8\nevent: tx.state_changed\ndata: " + ev("8", watched.String()) + "\n"

	var out bytes.Buffer
	w := &watcher{x: &env{json: true, stdout: &out, stderr: io.Discard}, tx: &watched, printed: 4}
	c := &sseConn{body: io.NopCloser(strings.NewReader(stream)), cancel: func() {}, watchdog: time.AfterFunc(time.Hour, func() {})}
	done, delivered, err := w.read(c)
	c.close()
	if done || !delivered || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read: done %v delivered %v err %v; want the stream to have ended early", done, delivered, err)
	}
	var seqs []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		seq, _, _ := strings.Cut(strings.TrimPrefix(l, `{"seq":`), ",")
		seqs = append(seqs, seq)
	}
	if diff := cmp.Diff([]string{"5", "7"}, seqs); diff != "" {
		t.Errorf("printed seqs (-want +got):\n%s\n%s", diff, out.String())
	}
	if w.lastID != "4" || w.printed != 7 || w.retry != 3*time.Second {
		t.Errorf("after the stream: lastID %q, printed %d, retry %s; want 4, 7, 3s", w.lastID, w.printed, w.retry)
	}
}

// TestReadStreamOutputFails: an event that cannot be printed ends the
// watch; reconnecting would only fail again.
func TestReadStreamOutputFails(t *testing.T) {
	stream := "id: 5\ndata: {\"seq\":5,\"id\":\"evt_5\",\"type\":\"tx.attempt\",\"tx_id\":\"x\",\"chain_id\":1,\"signer\":\"0x00\",\"created_at\":\"2025-01-15T10:04:05Z\",\"data\":{}}\n\n"
	w := &watcher{x: &env{stdout: failingWriter{}, stderr: io.Discard}, printed: -1}
	c := &sseConn{body: io.NopCloser(strings.NewReader(stream)), cancel: func() {}, watchdog: time.AfterFunc(time.Hour, func() {})}
	defer c.close()
	_, _, err := w.read(c)
	var h *handleError
	if !errors.As(err, &h) || !errors.Is(err, errClosed) {
		t.Errorf("read with a closed output: %v, want the write's error as a handleError", err)
	}
}

var errClosed = errors.New("closed")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errClosed }

func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args      []string
		wantPos   []string
		wantKey   string
		wantError bool
	}{
		{[]string{"ID", "--key-file", "k"}, []string{"ID"}, "k", false},
		{[]string{"--key-file", "k", "ID", "more"}, []string{"ID", "more"}, "k", false},
		{[]string{"ID", "--", "--key-file", "k"}, []string{"ID", "--key-file", "k"}, "", false},
		{[]string{"ID", "--nope"}, nil, "", true},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		key := fs.String("key-file", "", "")
		pos, err := parseInterleaved(fs, c.args)
		if (err != nil) != c.wantError || *key != c.wantKey || !cmp.Equal(pos, c.wantPos) {
			t.Errorf("%q: %q %q %v; want %q %q", c.args, pos, *key, err, c.wantPos, c.wantKey)
		}
	}
}

// TestNextDelay: the delay grows to its cap and never undercuts what the
// server asked for (only bounds: the jitter is random).
func TestNextDelay(t *testing.T) {
	d := time.Duration(0)
	for range 20 {
		next := nextDelay(d, 0)
		if next < reconnectMin*4/5 || next > reconnectMax || (d > 0 && d < reconnectMax/2 && next < d) {
			t.Fatalf("after %s: %s", d, next)
		}
		d = next
	}
	if d < reconnectMax*4/5 {
		t.Errorf("the delay stays at %s, below its cap %s", d, reconnectMax)
	}
	if d := nextDelay(0, 4*time.Second); d < 3*time.Second || d > 4*time.Second {
		t.Errorf("with retry: 4000 the delay is %s", d)
	}
}

// TestHelp: every command has its usage, and help and usage errors
// answer without a key or a server.
func TestHelp(t *testing.T) {
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		err := Run(context.Background(), args, func(string) string { return "" }, nil, &out, &errb)
		return out.String(), errb.String(), ExitCode(err)
	}
	all, _, code := run("help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(all, "  "+c.name+" ") || c.summary == "" {
			t.Errorf("help does not list %q", c.name)
		}
		out, _, code := run(append([]string{"help"}, strings.Fields(c.name)...)...)
		if code != 0 || !strings.HasPrefix(out, "Usage: txctl [global flags] "+c.name) {
			t.Errorf("help %s: exit %d\n%s", c.name, code, out)
		}
	}
	if out, _, code := run("approve", "--help"); code != 0 || !strings.Contains(out, "--key-file PATH") {
		t.Errorf("approve --help: exit %d\n%s", code, out)
	}
	if out, _, code := run("help", "keys"); code != 0 || !strings.Contains(out, "keys revoke") {
		t.Errorf("help keys: exit %d\n%s", code, out)
	}
	if out, _, code := run("webhooks", "--help"); code != 0 || !strings.Contains(out, "webhooks rotate-secret") {
		t.Errorf("webhooks --help: exit %d\n%s", code, out)
	}
	if _, stderr, code := run("webhooks"); code != 2 || !strings.Contains(stderr, "webhooks needs a subcommand: create, list") {
		t.Errorf("webhooks alone: exit %d\n%s", code, stderr)
	}
	if out, _, code := run("version"); code != 0 || !strings.HasPrefix(out, "txctl ") {
		t.Errorf("version: exit %d %q", code, out)
	}
	if _, stderr, code := run(); code != 2 || !strings.Contains(stderr, "Usage: txctl") {
		t.Errorf("no command: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run("--url"); code != 2 || !strings.Contains(stderr, "flag needs an argument") {
		t.Errorf("--url without a value: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run("--key", "txf_secret", "--timeout", "-1s", "list"); code != 2 || strings.Contains(stderr, "txf_secret") {
		t.Errorf("a negative timeout: exit %d\n%s", code, stderr)
	}
}

// TestReadApproverKey: the checks signerd makes of a key file.
func TestReadApproverKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const seed = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // bytes 0..31
	const pub = "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
	if id, _, err := policy.ReadApproverKey(write("ok.key", `{"kind":"txfence-approver-key-v1","id":"alice","seed":"`+seed+`","public_key":"`+pub+`"}`, 0o600)); err != nil || id != "alice" {
		t.Fatalf("a good key file: %q %v", id, err)
	}
	for _, c := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"group.key", `{}`, 0o640, "lets others read it"},
		{"kind.key", `{"kind":"ssh","id":"alice","seed":"` + seed + `","public_key":"` + pub + `"}`, 0o600, "not an approver key file"},
		{"extra.key", `{"kind":"txfence-approver-key-v1","id":"alice","seed":"` + seed + `","public_key":"` + pub + `","x":1}`, 0o600, "not an approver key file"},
		{"pub.key", `{"kind":"txfence-approver-key-v1","id":"alice","seed":"` + seed + `","public_key":"` + seed + `"}`, 0o600, "does not give the public key"},
		{"seed.key", `{"kind":"txfence-approver-key-v1","id":"alice","seed":"AAEC","public_key":"` + pub + `"}`, 0o600, "not 32 bytes"},
		{"id.key", `{"kind":"txfence-approver-key-v1","id":"al ice","seed":"` + seed + `","public_key":"` + pub + `"}`, 0o600, "not an approver id"},
	} {
		if _, _, err := policy.ReadApproverKey(write(c.name, c.body, c.mode)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// The intent an approval signs takes the transaction's type from its
// document; without one there is nothing safe to sign.
func TestIntentRequestTakesTheTxType(t *testing.T) {
	tx := &components.Tx{TxId: uuid.New(), ChainId: 31337, From: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", Value: "1", Data: "0x"}
	if _, err := intentRequest(tx); err == nil || !strings.Contains(err.Error(), "no type") {
		t.Errorf("a transaction without a type: %v, want an error naming it", err)
	}
	for _, typ := range []components.TxType{components.Eip1559, components.Legacy} {
		tx.Type = &typ
		req, err := intentRequest(tx)
		if err != nil || string(req.Type) != string(typ) {
			t.Errorf("type %s: request %+v, %v", typ, req, err)
		}
	}
	bogus := components.TxType("blob")
	tx.Type = &bogus
	if _, err := intentRequest(tx); err == nil {
		t.Error("an unknown type: no error")
	}
}

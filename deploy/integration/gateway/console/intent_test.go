package console_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/gateway/console"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// abiType is an argument type, parsed here from a signature apart from
// both decoders under test.
type abiType struct {
	kind   string // address, bool, uint, fixed (bytesN), bytes, array, tuple
	size   int    // bytes of a uint or bytesN
	elem   *abiType
	fields []abiType
}

func parseArgs(t *testing.T, signature string) []abiType {
	t.Helper()
	_, list, _ := strings.Cut(signature, "(")
	return parseList(t, strings.TrimSuffix(list, ")"))
}

func parseList(t *testing.T, s string) []abiType {
	t.Helper()
	var out []abiType
	depth, start := 0, 0
	for i := 0; i <= len(s) && s != ""; i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
			case ')':
				depth--
			}
			if s[i] != ',' || depth > 0 {
				continue
			}
		}
		out = append(out, parseOne(t, s[start:i]))
		start = i + 1
	}
	return out
}

func parseOne(t *testing.T, s string) abiType {
	t.Helper()
	switch {
	case strings.HasSuffix(s, "[]"):
		e := parseOne(t, strings.TrimSuffix(s, "[]"))
		return abiType{kind: "array", elem: &e}
	case strings.HasPrefix(s, "("):
		return abiType{kind: "tuple", fields: parseList(t, s[1:len(s)-1])}
	case s == "address" || s == "bool" || s == "bytes":
		return abiType{kind: s}
	}
	if bits, ok := strings.CutPrefix(s, "uint"); ok {
		n, err := strconv.Atoi(bits)
		if err != nil {
			t.Fatalf("type %q", s)
		}
		return abiType{kind: "uint", size: n / 8}
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s, "bytes"))
	if err != nil || !strings.HasPrefix(s, "bytes") {
		t.Fatalf("type %q", s)
	}
	return abiType{kind: "fixed", size: n}
}

func (a abiType) dynamic() bool {
	switch a.kind {
	case "bytes", "array":
		return true
	case "tuple":
		return slices.ContainsFunc(a.fields, abiType.dynamic)
	}
	return false
}

// encode is the canonical encoding of a tuple of random values of types:
// heads in order, then the tails of the dynamic ones.
func encode(r *rand.Rand, types []abiType) []byte {
	headSize := 0
	for _, ty := range types {
		headSize += headLen(ty)
	}
	var head, tail []byte
	for _, ty := range types {
		if !ty.dynamic() {
			head = append(head, encodeStatic(r, ty)...)
			continue
		}
		head = append(head, wordOf(big.NewInt(int64(headSize+len(tail))))...)
		tail = append(tail, encodeDynamic(r, ty)...)
	}
	return append(head, tail...)
}

func headLen(a abiType) int {
	if a.kind != "tuple" || a.dynamic() {
		return 32
	}
	n := 0
	for _, f := range a.fields {
		n += headLen(f)
	}
	return n
}

func wordOf(v *big.Int) []byte { return v.FillBytes(make([]byte, 32)) }

// randomUint is 0, 1 or a value of up to bits bits: the edges matter (an
// approve of 0 revokes, an amount of 1 is one unit).
func randomUint(r *rand.Rand, bits int) *big.Int {
	switch r.IntN(4) {
	case 0:
		return new(big.Int)
	case 1:
		return big.NewInt(1)
	}
	b := make([]byte, bits/8)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return new(big.Int).SetBytes(b)
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func encodeStatic(r *rand.Rand, a abiType) []byte {
	switch a.kind {
	case "address":
		if r.IntN(4) == 0 { // the zero address: an ERC-721 approve that clears
			return make([]byte, 32)
		}
		return append(make([]byte, 12), randomBytes(r, 20)...)
	case "bool":
		return wordOf(big.NewInt(int64(r.IntN(2))))
	case "uint":
		return wordOf(randomUint(r, 8*a.size))
	case "fixed":
		return append(randomBytes(r, a.size), make([]byte, 32-a.size)...)
	}
	return encode(r, a.fields)
}

func encodeDynamic(r *rand.Rand, a abiType) []byte {
	switch a.kind {
	case "bytes":
		b := randomBytes(r, r.IntN(70))
		out := append(wordOf(big.NewInt(int64(len(b)))), b...)
		return append(out, make([]byte, (32-len(b)%32)%32)...)
	case "array":
		n := r.IntN(4)
		items := make([]abiType, n)
		for i := range items {
			items[i] = *a.elem
		}
		return append(wordOf(big.NewInt(int64(n))), encode(r, items)...)
	}
	return encode(r, a.fields)
}

// reading is one reading of call data, as both decoders give it; hex is
// compared in lower case, which the page writes.
type reading struct {
	Standard  string `json:"standard"`
	Signature string `json:"signature"`
	Selector  string `json:"selector"`
	Args      []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"args"`
	Effect *struct {
		Kind   string  `json:"kind"`
		Party  string  `json:"party"`
		Amount *string `json:"amount"`
	} `json:"effect"`
	Malformed bool `json:"malformed"`
}

// readsValid reports whether the policy reads data as a well-formed call.
func readsValid(data []byte) bool {
	return slices.ContainsFunc(policyReadings(data), func(r reading) bool { return !r.Malformed })
}

func policyReadings(data []byte) []reading {
	out := []reading{}
	for _, r := range policy.ReadCall(data) {
		var g reading
		g.Standard, g.Signature, g.Selector, g.Malformed = r.Standard, r.Signature, hex.EncodeToString(r.Selector[:]), r.Err != nil
		for _, a := range r.Args {
			g.Args = append(g.Args, struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			}{a.Name, strings.ToLower(a.Value)})
		}
		if e := r.Effect; e != nil {
			g.Effect = &struct {
				Kind   string  `json:"kind"`
				Party  string  `json:"party"`
				Amount *string `json:"amount"`
			}{Kind: e.Kind, Party: strings.ToLower(e.Party.Hex())}
			if e.Amount != nil {
				s := e.Amount.String()
				g.Effect.Amount = &s
			}
		}
		out = append(out, g)
	}
	return out
}

// TestIntentReaderMatchesPolicy holds the console's reader of call data
// (static/js/intent.js, run in Chromium) to the signer's policy
// (policy.ReadCall): both know the same calls by the same selectors, and
// on random canonical call data of each, then on that data cut short,
// extended, and with single bytes changed (dirty upper bytes and padding,
// offsets and lengths moved, bools beyond 1, lists of different lengths),
// both read the same: the same calls, arguments and effects, and refuse
// the same data as malformed. What the page shows an approver is then
// what the policy counts.
func TestIntentReaderMatchesPolicy(t *testing.T) {
	exe := chromiumPath(t)
	t.Parallel()
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	b := startBrowser(t, exe)
	b.do("navigate", chromedp.Navigate(srv.URL+console.Path))
	b.wait("#signin-key")
	module := `import("./js/intent.js")`

	type call struct{ Standard, Signature, Selector string }
	var want []call
	for _, c := range policy.Calls() {
		want = append(want, call{c.Standard, c.Signature, hex.EncodeToString(c.Selector[:])})
	}
	var got []call
	if err := json.Unmarshal([]byte(eval[string](b, module+`.then((m) => JSON.stringify(m.calls()))`, chromedp.EvalAwaitPromise)), &got); err != nil {
		t.Fatal(err)
	}
	order := func(a, b call) int { return strings.Compare(a.Standard+a.Signature, b.Standard+b.Signature) }
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the calls the page reads (-policy +page):\n%s", diff)
	}

	r := rand.New(rand.NewPCG(7, 11))
	var corpus [][]byte
	for _, c := range policy.Calls() {
		sel := c.Selector[:]
		types := parseArgs(t, c.Signature)
		for n := range 8 {
			valid := append(slices.Clone(sel), encode(r, types)...)
			// Random arrays of a batch call may differ in length, which the
			// policy refuses: the first sample of each call is drawn until
			// the policy reads it, so that every call is read valid at
			// least once, whatever order the calls come in.
			for tries := 0; n == 0 && !readsValid(valid) && tries < 1000; tries++ {
				valid = append(slices.Clone(sel), encode(r, types)...)
			}
			corpus = append(corpus, valid, valid[:len(valid)-1], append(slices.Clone(valid), 0), append(slices.Clone(valid), make([]byte, 32)...))
			for range 12 {
				i := 4 + r.IntN(len(valid)-4)
				for _, flip := range []byte{0x01, 0x80} {
					d := slices.Clone(valid)
					d[i] ^= flip
					corpus = append(corpus, d)
				}
			}
		}
	}
	corpus = append(corpus, nil, []byte{0xa9, 0x05, 0x9c}, []byte{0x12, 0x34, 0x56, 0x78})

	seen := map[string]bool{}
	var valid, malformed, differ int
	for start := 0; start < len(corpus); start += 500 {
		batch := corpus[start:min(start+500, len(corpus))]
		inputs := make([]string, len(batch))
		for i, d := range batch {
			inputs[i] = "0x" + hex.EncodeToString(d)
		}
		in, _ := json.Marshal(inputs)
		var pageReadings [][]reading
		out := eval[string](b, module+fmt.Sprintf(`.then((m) => JSON.stringify(%s.map((x) => m.readCall(m.fromHex(x)).map((r) =>
			({ standard: r.standard, signature: r.signature, selector: r.selector, args: r.args || null, effect: r.effect || null, malformed: "error" in r })))))`, in),
			chromedp.EvalAwaitPromise)
		if err := json.Unmarshal([]byte(out), &pageReadings); err != nil {
			t.Fatal(err)
		}
		for i, d := range batch {
			want := policyReadings(d)
			if diff := cmp.Diff(want, pageReadings[i]); diff != "" {
				t.Errorf("call data %x (-policy +page):\n%s", d, diff)
				if differ++; differ == 10 {
					t.Fatal("and more: stopping here")
				}
			}
			for _, w := range want {
				if w.Malformed {
					malformed++
				} else {
					valid++
					seen[w.Standard+" "+w.Signature] = true
				}
			}
		}
	}
	// The corpus is worth something only if it holds a valid reading of
	// every call, and many refused ones.
	for _, c := range policy.Calls() {
		if !seen[c.Standard+" "+c.Signature] {
			t.Errorf("no valid call data of %s %s in the corpus", c.Standard, c.Signature)
		}
	}
	if malformed < len(corpus)/4 {
		t.Errorf("only %d malformed readings in %d call data", malformed, len(corpus))
	}
	t.Logf("%d call data: %d valid readings, %d malformed, the same in both", len(corpus), valid, malformed)
	for _, p := range b.takeProblems() {
		t.Errorf("the page reported: %s", p)
	}
}

package policy_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txfence/txfence/signer-zonec/policy"
)

// TestExamplePoliciesBoundEverything loads every policy file in the
// repository (a JSON object with version, chains and rules): each must
// load, and no allow rule, cancels entry or token in it may allow an
// unbounded amount of value, fees or token units. These files are what
// operators copy.
func TestExamplePoliciesBoundEverything(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var top map[string]json.RawMessage
		if json.NewDecoder(bytes.NewReader(data)).Decode(&top) != nil {
			return nil
		}
		if top["version"] != nil && top["chains"] != nil && top["rules"] != nil {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"development.json", "production-example.json"} {
		if !strings.Contains(strings.Join(files, " "), want) {
			t.Fatalf("found %q, not %s: the walk misses the examples", files, want)
		}
	}
	for _, path := range files {
		p, err := policy.Load(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, problem := range policy.Unbounded(p) {
			t.Errorf("%s: %s", path, problem)
		}
	}
}

// TestUnboundedNamesWhatIsUnbounded: the check above finds each kind of
// unbounded permission.
func TestUnboundedNamesWhatIsUnbounded(t *testing.T) {
	t.Parallel()
	p := mustParse(t, withTokens(`{"id": "no-value-cap", "effect": "allow", "match": {"chains": [10]}, "limits": {`+feeCaps+`}},
		{"id": "no-value-window", "effect": "allow", "match": {"chains": [1]}, "limits": {"max_value_per_tx": "1", `+feeCaps+`}, "erc20_spenders": ["0x00000000000000000000000000000000000000e1"]},
		{"id": "zero-value", "effect": "allow", "match": {"chains": [1], "value": {"max": "0"}}, "limits": {`+feeCaps+`}},
		{"id": "bounded", "effect": "allow", "match": {"chains": [1]}, "limits": {"max_value_per_tx": "1", "windows": [{"duration": "1h", "max_value": "2"}], `+feeCaps+`},
		 "tokens": {"usd": {"max_amount_per_tx": "1", "windows": [{"duration": "1h", "max_amount": "2"}]}}}`))
	want := []string{
		"rule no-value-cap: no per-transaction value cap",
		"rule no-value-window: no value window",
		"rule no-value-window: erc20_spenders, whose allowances no cap counts (declare the token and list its spenders)",
	}
	got := policy.Unbounded(p)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Unbounded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

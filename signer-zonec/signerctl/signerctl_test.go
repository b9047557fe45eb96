package signerctl

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunRefusesUnknownCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: signerctl keys"},
		{[]string{"serve"}, `unknown command "serve"`},
		{[]string{"audit"}, "usage: signerctl audit verify"},
		{[]string{"audit", "rewrite"}, "DATABASE_URL is required"},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), tc.args, func(string) string { return "" }, nil, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("signerctl %v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}

package logtest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/txfence/txfence/testinfra/logtest"
)

func TestBufferTakesConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b logtest.Buffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			fmt.Fprintf(&b, "line %d\n", i)
			_ = b.String() // read while others write
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 10 {
		t.Errorf("%d lines, want 10:\n%s", n, b.String())
	}
	if got := b.Bytes(); string(got) != b.String() {
		t.Errorf("Bytes = %q, String = %q", got, b.String())
	}
}

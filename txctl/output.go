package txctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// jsonLine prints an API document on one line, its values untouched:
// compacting removes only the white space between tokens, so a number
// too long for a float keeps every digit.
func (x *env) jsonLine(body []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return fmt.Errorf("the API answered something that is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := x.stdout.Write(buf.Bytes())
	return err
}

// note tells the person running txctl something beside the output, on
// standard error so that standard output stays what was asked for.
func (x *env) note(format string, args ...any) {
	fmt.Fprintf(x.stderr, "txctl: "+format+"\n", args...)
}

// fields prints name/value pairs aligned, leaving out empty values.
type fields struct {
	rows [][2]string
}

func (f *fields) add(name, value string) {
	if value != "" {
		f.rows = append(f.rows, [2]string{name, value})
	}
}

func (f *fields) str(name string, v *string) {
	if v != nil {
		f.add(name, *v)
	}
}

func (f *fields) int(name string, v *int64) {
	if v != nil {
		f.add(name, strconv.FormatInt(*v, 10))
	}
}

func (f *fields) time(name string, v *time.Time) {
	if v != nil {
		f.add(name, formatTime(*v))
	}
}

func (f *fields) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, r := range f.rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// table prints rows under a header, columns aligned.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return formatTime(*t)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func formatInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// shortData shows call data whole when short, else its start and length.
func shortData(hex string) string {
	n := (len(hex) - 2) / 2
	if n <= 0 {
		return "0x (none)"
	}
	if len(hex) <= 74 {
		return fmt.Sprintf("%s (%d bytes)", hex, n)
	}
	return fmt.Sprintf("%s… (%d bytes)", hex[:74], n)
}

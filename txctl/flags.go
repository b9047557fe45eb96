package txctl

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// multiFlag is a flag that may be given more than once (--scope a
// --scope b); a comma also separates values (--scope a,b).
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}

// given reports which flags of fs the command line set, to tell an
// absent flag from one set to its zero value.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// parseID reads a transaction, webhook or key id argument.
func parseID(cmd, what, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.UUID{}, usagef(cmd, "%q is not a %s id (a UUID)", s, what)
	}
	return id, nil
}

// parseTimeOrAgo reads a time as RFC 3339, or as a duration before now
// (90m: an hour and a half ago).
func parseTimeOrAgo(cmd, flagName, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef(cmd, "--%s %q: want a time (2025-01-15T10:00:00Z) or a duration before now (90m)", flagName, s)
}

// parseTimeOrIn reads a time as RFC 3339, or as a duration from now (720h:
// thirty days from now).
func parseTimeOrIn(cmd, flagName, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	return time.Time{}, usagef(cmd, "--%s %q: want a time (2026-01-15T10:00:00Z) or a duration from now (720h)", flagName, s)
}

// enumFlag checks a flag's value against an enum's members.
func enumFlag[T ~string](cmd, flagName, s string, valid func(T) bool, members ...T) (T, error) {
	if v := T(s); valid(v) {
		return v, nil
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = string(m)
	}
	return "", usagef(cmd, "--%s %q: want one of %s", flagName, s, strings.Join(names, ", "))
}

// pagination is the --limit, --cursor and --all of a list command.
type pagination struct {
	limit  int
	cursor string
	all    bool
}

func definePagination(fs *flag.FlagSet, p *pagination) {
	fs.IntVar(&p.limit, "limit", 0, "at most `N` items per page (the API's default is 100, at most 1000)")
	fs.StringVar(&p.cursor, "cursor", "", "continue at `CURSOR`, a page's next_cursor")
	fs.BoolVar(&p.all, "all", false, "follow next_cursor through every page")
}

// params are the limit and cursor to send for one page.
func (p *pagination) params(cmd string) (*int32, *string, error) {
	var limit *int32
	if p.limit != 0 {
		if p.limit < 1 || p.limit > 1000 {
			return nil, nil, usagef(cmd, "--limit %d: want 1 to 1000", p.limit)
		}
		l := int32(p.limit)
		limit = &l
	}
	var cursor *string
	if p.cursor != "" {
		cursor = &p.cursor
	}
	return limit, cursor, nil
}

// pages calls page with each cursor in turn: once, or until the last page
// with --all. page returns the next cursor, nil on the last page.
func (p *pagination) pages(x *env, page func(cursor *string) (*string, error)) error {
	_, cursor, err := p.params(x.cmd.name)
	if err != nil {
		return err
	}
	for {
		next, err := page(cursor)
		if err != nil {
			return err
		}
		if next == nil || *next == "" {
			return nil
		}
		if !p.all {
			if !x.json {
				_, err := fmt.Fprintf(x.stdout, "more: --cursor %s (or --all)\n", *next)
				return err
			}
			return nil
		}
		cursor = next
	}
}

package pg

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Query files: a store keeps its SQL in .sql files embedded in its package
// (one per topic, or one per store), each statement under a name line:
//
//	-- name: AcquireLease
//	-- Takes a lease that is free or expired, or renews one the node
//	-- holds. (What the statement does and, where it matters, why.)
//	INSERT INTO signer_lease ...;
//
// The comment lines right under the name line are the query's doc; the
// statement runs to the next name line, and a trailing semicolon is
// dropped. Go code asks for each query once, by name, in a package-level
// variable (var qAcquire = queries.Use("AcquireLease")), and sends its SQL
// as it is: no statement is put together at run time. A test calls
// pgtest.RequireQueries, which prepares every query on the migrated schema
// and fails on a query no code uses.

// Query is one named statement of a store's query files.
type Query struct {
	Name string
	// Doc is the comment under the name line, without the comment marks.
	Doc string
	// SQL is what is sent to the server: the name line, so that
	// pg_stat_activity and the server's logs say which query a statement
	// is, then the statement.
	SQL string
	// Pos is file:line of the name line, for messages.
	Pos string
}

// Queries are a store's named statements.
type Queries struct {
	list  []Query
	index map[string]int

	mu   sync.Mutex
	used map[string]bool
}

var (
	nameLine  = regexp.MustCompile(`^--\s*name:(.*)$`)
	queryName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
)

// LoadQueries reads every *.sql file at the root of fsys (usually an
// embed.FS), in name order. A name line without a name, a name that is not
// an identifier, a name used twice (in any of the files), a query with no
// statement, or SQL above a file's first name line is an error.
func LoadQueries(fsys fs.FS) (*Queries, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("read query files: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("read query files: no .sql file")
	}
	qs := &Queries{index: map[string]int{}, used: map[string]bool{}}
	for _, file := range files { // fs.Glob sorts
		body, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read query files: %w", err)
		}
		if err := qs.parse(file, string(body)); err != nil {
			return nil, err
		}
	}
	return qs, nil
}

// parse adds the queries of one file.
func (qs *Queries) parse(file, body string) error {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	var (
		cur  *Query
		doc  []string
		stmt []string
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		// Comment lines after the statement (above the next name line)
		// belong to no query.
		for len(stmt) > 0 && isCommentOrBlank(stmt[len(stmt)-1]) {
			stmt = stmt[:len(stmt)-1]
		}
		text := strings.TrimSpace(strings.Join(stmt, "\n"))
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
		if text == "" {
			return fmt.Errorf("query %s (%s) has no statement", cur.Name, cur.Pos)
		}
		cur.Doc = strings.Join(doc, "\n")
		cur.SQL = "-- name: " + cur.Name + "\n" + text
		qs.index[cur.Name] = len(qs.list)
		qs.list = append(qs.list, *cur)
		return nil
	}
	for i, line := range lines {
		pos := fmt.Sprintf("%s:%d", file, i+1)
		if m := nameLine.FindStringSubmatch(line); m != nil {
			if err := finish(); err != nil {
				return err
			}
			name := strings.TrimSpace(m[1])
			switch {
			case name == "":
				return fmt.Errorf("%s: a name line without a name", pos)
			case !queryName.MatchString(name):
				return fmt.Errorf("%s: query name %q is not an identifier (letters, digits, underscores)", pos, name)
			}
			if j, dup := qs.index[name]; dup {
				return fmt.Errorf("%s: query %s is already defined at %s", pos, name, qs.list[j].Pos)
			}
			cur, doc, stmt = &Query{Name: name, Pos: pos}, nil, nil
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil:
			if !isCommentOrBlank(line) {
				return fmt.Errorf("%s: SQL above the file's first -- name: line", pos)
			}
		case len(stmt) == 0 && trimmed == "":
			// blank lines between the doc and the statement
		case len(stmt) == 0 && strings.HasPrefix(trimmed, "--"):
			doc = append(doc, strings.TrimSpace(strings.TrimPrefix(trimmed, "--")))
		default:
			stmt = append(stmt, line)
		}
	}
	return finish()
}

func isCommentOrBlank(line string) bool {
	trimmed := strings.TrimSpace(line)
	return trimmed == "" || strings.HasPrefix(trimmed, "--")
}

// MustLoadQueries loads the query files in dir of an embedded file system,
// for a store's package-level Queries variable. A malformed file is a
// build defect, so it panics; every store's tests load it.
func MustLoadQueries(fsys fs.FS, dir string) *Queries {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	qs, err := LoadQueries(sub)
	if err != nil {
		panic(err)
	}
	return qs
}

// Use returns the query called name and notes that the store uses it. It
// panics when there is none: stores call it in package-level variables, so
// that a misspelt name fails when the package loads, and Unused can tell
// the queries no code asks for.
func (qs *Queries) Use(name string) Query {
	q, ok := qs.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("pg: no query named %q in the query files", name))
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.used[name] = true
	return q
}

// Lookup returns the query called name without noting it used, for tests
// and tools.
func (qs *Queries) Lookup(name string) (Query, bool) {
	i, ok := qs.index[name]
	if !ok {
		return Query{}, false
	}
	return qs.list[i], true
}

// All returns every query, file by file in name order, each file's in its
// order.
func (qs *Queries) All() []Query { return slices.Clone(qs.list) }

// Unused lists, sorted, the queries that no Use asked for: dead SQL.
func (qs *Queries) Unused() []string {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	var unused []string
	for _, q := range qs.list {
		if !qs.used[q.Name] {
			unused = append(unused, q.Name)
		}
	}
	slices.Sort(unused)
	return unused
}

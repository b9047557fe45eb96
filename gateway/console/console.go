// Package console serves the operator console, a web page at /console/:
// an operator signs in with an API key and sees the tenant's signers
// (owner node, fencing token, next nonce, open transactions), stuck
// transactions and pending approvals, reads a transaction's timeline, and
// cancels, resends or bumps. The Wallets page reads the ledger's books of
// a signer: its wallet balance in each asset and a wallet's statement.
//
// The console never approves. A page served to the internet is no place
// for an approver's key, so a pending approval shows what an approval
// covers (its call data decoded as the signer's policy reads it) and the
// txctl command an approver runs on their own machine, which shows the
// same again before it signs.
//
// The page is static HTML, CSS and JavaScript modules, embedded in the
// binary and built without any step or package: it calls the public API
// (/api/v1) of its own origin with the key the operator pasted, so it has
// no handler of its own and no more power than that key. Every answer
// carries a Content-Security-Policy that allows nothing but this origin's
// own files (no inline script or style, no eval, Trusted Types enforced),
// so data shown in the page can never run as code.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// Path is where the console is served; Path without its final slash
// redirects there.
const Path = "/console/"

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the page this origin's own scripts, styles,
// images and API calls and nothing else. Trusted Types with no policy
// make every HTML or script injection sink throw, so a slip that passed a
// string to innerHTML would fail loudly instead of rendering data as
// markup. form-action 'none': the page's forms are handled by script and
// never submitted.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; " +
	"frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

// contentTypes are the types of the files the console ships. A file of
// another kind is refused when the handler is built, so that nothing is
// served with a type the browser would have to guess.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one static file, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

type handler struct {
	files map[string]file // by path below static/, "index.html" for the root
}

var files = sync.OnceValues(func() (map[string]file, error) { return load(static) })

// load reads every file below static/ in fsys.
func load(fsys fs.FS) (map[string]file, error) {
	out := map[string]file{}
	err := fs.WalkDir(fsys, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("console: %s: no content type for %q files", p, path.Ext(p))
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		out[strings.TrimPrefix(p, "static/")] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := out["index.html"]; !ok {
		return nil, fmt.Errorf("console: static/index.html is missing")
	}
	return out, nil
}

// Handler serves the console: Path and the files below it, and a
// redirect from Path without its slash. Any other path is a 404. It
// panics if the embedded files are unusable, which the package's tests
// rule out for every build.
func Handler() http.Handler {
	all, err := files()
	if err != nil {
		panic(err)
	}
	return &handler{files: all}
}

// Mount adds the console's routes to r (gatewayd's public router).
func Mount(r chi.Router) {
	h := Handler()
	r.Handle(strings.TrimSuffix(Path, "/"), h)
	r.Handle(Path+"*", h)
}

// setSecurityHeaders sets the headers every console answer carries, the
// error answers included.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if p == strings.TrimSuffix(Path, "/") {
		target := Path
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(p, Path)
	if name == "" {
		name = "index.html"
	}
	f, found := h.files[name]
	if !ok || !found {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	// The file names carry no version, so a browser must ask again each
	// time (a 304 while the ETag holds): a new gatewayd then never meets
	// modules of the old one in the cache.
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}

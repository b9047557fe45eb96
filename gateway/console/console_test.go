package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
)

// securityHeaders are what every answer of the console carries.
var securityHeaders = map[string]string{
	"Content-Security-Policy": contentSecurityPolicy,
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
}

func serve(t *testing.T, method, target string, header ...string) *http.Response {
	t.Helper()
	r := chi.NewRouter()
	Mount(r)
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w.Result()
}

func checkSecurityHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	got := map[string]string{}
	for k := range securityHeaders {
		got[k] = resp.Header.Get(k)
	}
	if diff := cmp.Diff(securityHeaders, got); diff != "" {
		t.Errorf("%s: security headers (-want +got):\n%s", what, diff)
	}
}

func TestCSPForbidsInlineCode(t *testing.T) {
	// The directives that keep data from running as code; a change that
	// loosens one must fail here, not pass unnoticed.
	directives := map[string]string{}
	for d := range strings.SplitSeq(contentSecurityPolicy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	want := map[string]string{
		"default-src": "'self'", "script-src": "'self'", "style-src": "'self'", "object-src": "'none'",
		"base-uri": "'none'", "frame-ancestors": "'none'", "require-trusted-types-for": "'script'",
	}
	for name, value := range want {
		if directives[name] != value {
			t.Errorf("CSP %s = %q, want %q (policy %q)", name, directives[name], value, contentSecurityPolicy)
		}
	}
	if strings.Contains(contentSecurityPolicy, "unsafe-") {
		t.Errorf("CSP allows something unsafe: %q", contentSecurityPolicy)
	}
}

func TestServesEveryFile(t *testing.T) {
	all, err := load(static)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"index.html", "console.css", "favicon.svg", "js/main.js", "js/intent.js"} {
		if _, ok := all[name]; !ok {
			t.Errorf("%s is not embedded", name)
		}
	}
	for name, f := range all {
		resp := serve(t, "GET", Path+name)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != string(f.body) {
			t.Errorf("GET %s: %d, %d bytes, want 200 and %d bytes", name, resp.StatusCode, len(body), len(f.body))
		}
		if got := resp.Header.Get("Content-Type"); got != f.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", name, got, f.contentType)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache (file names carry no version)", name, got)
		}
		if resp.Header.Get("ETag") != f.etag {
			t.Errorf("GET %s: ETag %q, want %q", name, resp.Header.Get("ETag"), f.etag)
		}
		checkSecurityHeaders(t, "GET "+name, resp)

		if resp := serve(t, "GET", Path+name, "If-None-Match", f.etag); resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", name, resp.StatusCode)
		}
	}
}

func TestIndex(t *testing.T) {
	resp := serve(t, "GET", Path)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(string(body), `<script type="module" src="js/main.js"></script>`) {
		t.Fatalf("GET %s: %d %q\n%s", Path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	checkSecurityHeaders(t, "GET "+Path, resp)

	head := serve(t, "HEAD", Path)
	if b, _ := io.ReadAll(head.Body); head.StatusCode != http.StatusOK || len(b) != 0 {
		t.Errorf("HEAD %s: %d with %d bytes", Path, head.StatusCode, len(b))
	}
}

func TestRedirectsToSlash(t *testing.T) {
	for target, want := range map[string]string{"/console": "/console/", "/console?tab=1": "/console/?tab=1"} {
		resp := serve(t, "GET", target)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %d Location %q, want 301 to %s", target, resp.StatusCode, resp.Header.Get("Location"), want)
		}
		checkSecurityHeaders(t, "GET "+target, resp)
	}
}

func TestUnknownPathsAreNotFound(t *testing.T) {
	for _, p := range []string{
		"/console/nope.js", "/console/js/", "/console/js", "/console/static/index.html", "/console/index.html/",
		"/console/js/../console.go", "/console/%2e%2e/console.go", "/console/console.go", "/console/.hidden",
	} {
		resp := serve(t, "GET", p)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p, got)
		}
		checkSecurityHeaders(t, "GET "+p, resp)
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		resp := serve(t, m, Path)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: %d Allow %q, want 405 with GET, HEAD", m, Path, resp.StatusCode, resp.Header.Get("Allow"))
		}
		checkSecurityHeaders(t, m+" "+Path, resp)
	}
}

func TestLoadRefusesUnknownFilesAndMissingIndex(t *testing.T) {
	if _, err := load(fstest.MapFS{"static/index.html": {}, "static/notes.txt": {}}); err == nil {
		t.Error("a .txt file was accepted: it would be served with a guessed type")
	}
	if _, err := load(fstest.MapFS{"static/app.js": {}}); err == nil {
		t.Error("no index.html was accepted")
	}
}

// staticFiles are the embedded files' contents by path below static/.
func staticFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, p)
		out[strings.TrimPrefix(p, "static/")] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// localURL reports whether an attribute's URL stays on this origin: a
// relative path or a fragment, no scheme, no network-path reference.
func localURL(u string) bool {
	u = strings.TrimSpace(strings.ToLower(u))
	return !strings.HasPrefix(u, "//") && !strings.Contains(u, ":")
}

// TestMarkupHasNoInlineCode reads every HTML and SVG file as a browser's
// tokenizer does (template contents included) and refuses inline scripts,
// style elements and attributes, event handler attributes and anything
// loaded from elsewhere; the CSP would block them, and the page would
// break in a way only a browser shows.
func TestMarkupHasNoInlineCode(t *testing.T) {
	urlAttrs := []string{"href", "src", "action", "formaction", "poster", "data", "xlink:href"}
	for name, text := range staticFiles(t) {
		if ext := path.Ext(name); ext != ".html" && ext != ".svg" {
			continue
		}
		z := html.NewTokenizer(strings.NewReader(text))
		inScript := false
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				if z.Err() != io.EOF {
					t.Errorf("%s: %v", name, z.Err())
				}
				break
			}
			tok := z.Token()
			switch tt {
			case html.TextToken:
				if inScript && strings.TrimSpace(tok.Data) != "" {
					t.Errorf("%s: inline script %q", name, tok.Data)
				}
			case html.EndTagToken:
				if tok.Data == "script" {
					inScript = false
				}
			case html.StartTagToken, html.SelfClosingTagToken:
				switch tok.Data {
				case "style":
					t.Errorf("%s: a <style> element; styles belong in console.css", name)
				case "script":
					inScript = tt == html.StartTagToken
					src, typ := "", ""
					for _, a := range tok.Attr {
						switch a.Key {
						case "src":
							src = a.Val
						case "type":
							typ = a.Val
						}
					}
					if src == "" || typ != "module" {
						t.Errorf("%s: <script> must be type=module with a src: %s", name, tok)
					}
				}
				for _, a := range tok.Attr {
					key := strings.ToLower(a.Key)
					switch {
					case strings.HasPrefix(key, "on"):
						t.Errorf("%s: event handler attribute %s on <%s>", name, a.Key, tok.Data)
					case key == "style":
						t.Errorf("%s: style attribute on <%s>", name, tok.Data)
					case slices.Contains(urlAttrs, key) && !localURL(a.Val):
						t.Errorf("%s: <%s %s=%q> leaves the origin", name, tok.Data, a.Key, a.Val)
					}
				}
			}
		}
	}
}

// The JavaScript builds the DOM with textContent and createElement only.
// These would turn data into markup or code (and throw under the CSP's
// Trusted Types), set inline styles, or reach another origin.
var forbiddenJS = []*regexp.Regexp{
	regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|DOMParser|srcdoc`),
	regexp.MustCompile(`document\.write|\beval\s*\(|new\s+Function\b|setTimeout\(\s*['"\x60]|setInterval\(\s*['"\x60]`),
	regexp.MustCompile(`\.style\b|setAttribute\(\s*['"](style|on)`),
	regexp.MustCompile(`https?:|wss?:|//[a-z0-9.-]+\.[a-z]{2,}/|javascript:`),
	regexp.MustCompile(`localStorage|document\.cookie|indexedDB`),
}

var importFrom = regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^;'"]*?\bfrom\s+'([^']+)';|^\s*import\s+'([^']+)';|\bimport\s*\(`)

func TestScriptsBuildTheDOMWithoutMarkup(t *testing.T) {
	files := staticFiles(t)
	for name, text := range files {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, re := range forbiddenJS {
			for _, m := range re.FindAllString(text, -1) {
				t.Errorf("%s: %q is not allowed in the console's scripts", name, m)
			}
		}
		// Every static import names an embedded module; a dynamic import
		// could name anything, so there is none.
		for _, m := range importFrom.FindAllStringSubmatch(text, -1) {
			spec := m[1] + m[2]
			if spec == "" {
				t.Errorf("%s: dynamic import()", name)
				continue
			}
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s: import %q is not a relative module", name, spec)
				continue
			}
			if _, ok := files[path.Join(path.Dir(name), spec)]; !ok {
				t.Errorf("%s: import %q names no embedded file", name, spec)
			}
		}
	}
	if _, ok := files["js/main.js"]; !ok {
		t.Fatal("js/main.js is missing")
	}
}

func TestStylesLoadNothing(t *testing.T) {
	for name, text := range staticFiles(t) {
		if path.Ext(name) != ".css" {
			continue
		}
		if strings.Contains(text, "@import") || strings.Contains(text, "url(") {
			t.Errorf("%s: @import or url(): the console's styles load nothing", name)
		}
	}
}

// keyHandling are the marks of a page that reads or uses a private key:
// WebCrypto key import, generation or signing, Ed25519, PKCS #8, the
// approver key file's kind and fields, and reading files the user picks.
// The console digests (the intent hash) and does nothing else with
// WebCrypto.
var keyHandling = []*regexp.Regexp{
	regexp.MustCompile(`\b(importKey|exportKey|generateKey|deriveKey|deriveBits|unwrapKey|wrapKey|encrypt|decrypt)\b`),
	regexp.MustCompile(`\.sign\s*\(|\bsign\s*\(\s*\{`),
	regexp.MustCompile(`(?i)ed25519|pkcs ?#?8|\bjwk\b|txfence-approver-key|\bseed\b|private[ _-]?key|secret[ _-]?key`),
	regexp.MustCompile(`FileReader|showOpenFilePicker|\.files\b|type="file"|type=file|type: 'file'|<textarea`),
	// Posting an approval or a rejection: an approver's act, signed with
	// their key, which happens in txctl.
	regexp.MustCompile(`(?i)post\([^)]*/(approvals|reject)`),
}

// keyMarks lists what in text looks like key handling, per keyHandling;
// subtle.digest alone is allowed.
func keyMarks(text string) []string {
	var out []string
	for _, re := range keyHandling {
		out = append(out, re.FindAllString(text, -1)...)
	}
	for _, m := range regexp.MustCompile(`subtle\s*\.\s*(\w+)|subtle\(\)`).FindAllStringSubmatch(text, -1) {
		if m[1] != "digest" {
			out = append(out, m[0])
		}
	}
	return out
}

// TestNoApproverKeyMaterial: no page or script the console serves reads a
// key file or holds key material. Approvals are signed by txctl on the
// approver's machine; the console, served to the internet, shows the
// command. Every file is read as served, through the handler.
func TestNoApproverKeyMaterial(t *testing.T) {
	// The check must see key handling where there is some, or its silence
	// below proves nothing: the lines of the approver module the console
	// once had.
	for _, bad := range []string{
		`key = await subtle().importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign']);`,
		`const sig = await crypto.subtle.sign({ name: 'Ed25519' }, loaded.key, msg);`,
		`const text = (await file.files[0].text()).trim();`,
		`<input id="approver-file" type="file" accept=".key">`,
		`<textarea id="approver-paste"></textarea>`,
		`const seed = base64Strict(doc.seed);`,
		"post(`/tx/${id}/approvals`, body)",
		"post(`/tx/${id}/reject`, { approver: id })",
	} {
		if len(keyMarks(bad)) == 0 {
			t.Errorf("key handling not noticed in %q", bad)
		}
	}
	if m := keyMarks("new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))"); len(m) != 0 {
		t.Errorf("a digest is taken for key handling: %q", m)
	}

	all, err := load(static)
	if err != nil {
		t.Fatal(err)
	}
	for name := range all {
		resp := serve(t, "GET", Path+name)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", name, resp.StatusCode)
		}
		for _, m := range keyMarks(string(body)) {
			t.Errorf("%s: %q: the console must not read or use approver keys", name, m)
		}
		if path.Ext(name) != ".html" {
			continue
		}
		// Inputs: text, search and the API key's password field only.
		z := html.NewTokenizer(strings.NewReader(string(body)))
		for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
			tok := z.Token()
			if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
				continue
			}
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Key] = a.Val
			}
			switch {
			case tok.Data == "textarea":
				t.Errorf("%s: a <textarea id=%q>: nothing is pasted into the console but an API key", name, attr["id"])
			case tok.Data == "input" && attr["type"] == "password" && attr["id"] != "signin-key":
				t.Errorf("%s: a password input %q besides the API key's", name, attr["id"])
			case tok.Data == "input" && !slices.Contains([]string{"", "text", "search", "password", "checkbox"}, attr["type"]):
				t.Errorf("%s: an input of type %q (id %q)", name, attr["type"], attr["id"])
			}
		}
	}
}

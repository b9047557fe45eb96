package openapi

import (
	"context"
	"embed"
	"fmt"
	"net/url"
	"path"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed *.yaml
var files embed.FS

// The spec files, as Load names them.
const (
	Components = "components.yaml"
	Gateway    = "gateway.yaml"
	TxManager  = "txmanager.yaml"
	Signer     = "signer.yaml"
	MEVRouter  = "mevrouter.yaml"
	Ledger     = "ledger.yaml"
)

// Services lists the spec of every service API.
var Services = []string{Gateway, TxManager, Signer, MEVRouter, Ledger}

// Load parses the spec file name (one of the constants above) from the
// embedded copies, resolves its references to components.yaml, and
// validates it. Validation middleware (oapi-codegen/nethttp-middleware)
// takes the result.
func Load(ctx context.Context, name string) (*openapi3.T, error) {
	data, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("openapi spec %q: %w", name, err)
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = true
	// References are resolved against the embedded files only: a spec that
	// names a file outside this directory, or a URL, fails to load.
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		if u.Scheme != "" || u.Host != "" {
			return nil, fmt.Errorf("reference to %s: only the embedded spec files can be referenced", u)
		}
		return files.ReadFile(path.Clean(u.Path))
	}
	doc, err := loader.LoadFromDataWithPath(data, &url.URL{Path: name})
	if err != nil {
		return nil, fmt.Errorf("load openapi spec %s: %w", name, err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validate openapi spec %s: %w", name, err)
	}
	return doc, nil
}

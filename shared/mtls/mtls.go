// Package mtls sets up the mutual TLS that every service-to-service call in
// txfence uses: TLS 1.3 only, client certificates required and verified
// against a private CA, certificate files reloaded when they change on disk,
// and the peer's identity taken from its certificate's URI SAN.
//
// An identity is a service name such as "txmanager"; on the wire it is the
// URI SAN spiffe://txfence/txmanager. Servers authorize requests per route
// with Allow; clients check that the server is the service they meant to
// call, so a stolen certificate of one service cannot impersonate another.
package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TrustDomain is the SPIFFE trust domain of txfence identities.
const TrustDomain = "txfence"

// IdentityURI is the URI SAN that names service.
func IdentityURI(service string) string {
	return "spiffe://" + TrustDomain + "/" + service
}

// IdentityOf returns the service name a certificate was issued to. It
// requires exactly one spiffe://txfence/<service> URI SAN.
func IdentityOf(cert *x509.Certificate) (string, error) {
	var found []string
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		if u.Host != TrustDomain {
			return "", fmt.Errorf("certificate identity %s is outside trust domain %q", u, TrustDomain)
		}
		name := strings.TrimPrefix(u.Path, "/")
		if name == "" || strings.Contains(name, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return "", fmt.Errorf("malformed certificate identity %s", u)
		}
		found = append(found, name)
	}
	switch len(found) {
	case 0:
		return "", errors.New("certificate has no spiffe identity")
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("certificate has %d spiffe identities, want one", len(found))
	}
}

// Files names the PEM files of a TLS identity.
type Files struct {
	CA   string // trust anchors for peers
	Cert string // this service's certificate chain
	Key  string // this service's private key
}

// Options tune a Source.
type Options struct {
	// CheckInterval bounds how often the files are checked for changes; a
	// check runs lazily on a handshake. Zero means one second; negative
	// means on every handshake (for tests).
	CheckInterval time.Duration
	Logger        *slog.Logger
}

// material is one consistent snapshot of the files.
type material struct {
	cert     tls.Certificate
	roots    *x509.CertPool
	identity string
	server   *tls.Config
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// Source holds the current certificate and trust anchors, reloading them
// when the files change. It is safe for concurrent use.
type Source struct {
	files    Files
	interval time.Duration
	log      *slog.Logger

	current atomic.Pointer[material]

	mu        sync.Mutex // serializes checks and reloads
	lastCheck time.Time
	stamps    [3]fileStamp
}

// Load reads files and returns a Source serving them.
func Load(files Files, opts Options) (*Source, error) {
	s := &Source{files: files, interval: opts.CheckInterval, log: opts.Logger}
	if s.interval == 0 {
		s.interval = time.Second
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Identity is the service name in this Source's own certificate.
func (s *Source) Identity() string { return s.current.Load().identity }

// Reload reads the files now. On error the previous material stays in use.
func (s *Source) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamps, err := s.stat()
	if err != nil {
		return err
	}
	return s.reloadLocked(stamps)
}

func (s *Source) reloadLocked(stamps [3]fileStamp) error {
	m, err := readMaterial(s.files)
	if err != nil {
		return err
	}
	s.stamps = stamps
	s.lastCheck = time.Now()
	prev := s.current.Swap(m)
	if prev != nil {
		s.log.Info("tls certificates reloaded", "identity", m.identity, "cert_file", s.files.Cert,
			"not_after", m.cert.Leaf.NotAfter)
	}
	return nil
}

func (s *Source) stat() ([3]fileStamp, error) {
	var stamps [3]fileStamp
	for i, f := range []string{s.files.CA, s.files.Cert, s.files.Key} {
		if f == "" { // a public certificate has no CA file
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return stamps, fmt.Errorf("tls files: %w", err)
		}
		stamps[i] = fileStamp{size: fi.Size(), modTime: fi.ModTime()}
	}
	return stamps, nil
}

// material returns the current snapshot, first reloading it if the files
// changed since the last check.
func (s *Source) material() *material {
	s.mu.Lock()
	if s.interval < 0 || time.Since(s.lastCheck) >= s.interval {
		s.lastCheck = time.Now()
		stamps, err := s.stat()
		if err == nil && stamps != s.stamps {
			err = s.reloadLocked(stamps)
		}
		if err != nil {
			// Keep serving the last good material: a half-written or
			// missing file during a rotation must not take the service down.
			s.log.Warn("tls certificate reload failed; keeping the previous certificates", "err", err)
		}
	}
	s.mu.Unlock()
	return s.current.Load()
}

func readMaterial(f Files) (*material, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", f.Cert, err)
	}
	if f.CA == "" {
		return &material{cert: cert}, nil // public: no peers to verify, no identity
	}
	identity, err := IdentityOf(cert.Leaf)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", f.Cert, err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA file %s holds no certificate", f.CA)
	}
	m := &material{cert: cert, roots: roots, identity: identity}
	m.server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    roots,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	return m, nil
}

// ServerConfig is the TLS configuration of a service's internal listener:
// TLS 1.3, client certificates required and verified against the CA. Every
// handshake uses the files as they are now.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.material().server, nil
		},
	}
}

// PublicServerConfig is the TLS configuration of a listener that faces
// clients (the gateway's public API): a server certificate from any CA,
// reloaded when its files change, no client certificate asked for, and TLS
// 1.2 or later since browsers and client libraries still speak 1.2.
func PublicServerConfig(certFile, keyFile string, opts Options) (*tls.Config, error) {
	s, err := Load(Files{Cert: certFile, Key: keyFile}, opts)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &s.material().cert, nil
		},
	}, nil
}

// ClientConfig is the TLS configuration for calling the service named
// server. It presents this Source's certificate and accepts only a server
// certificate chained to the CA and carrying the identity of server.
func (s *Source) ClientConfig(server string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.material().cert, nil
		},
		// The standard verification cannot follow a CA file that changes at
		// run time, so it is switched off here and done in VerifyConnection
		// against the current CA, plus the identity check the standard one
		// lacks. VerifyConnection runs on every handshake, resumed or not.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, s.material().roots, server)
		},
	}
}

func verifyServer(cs tls.ConnectionState, roots *x509.CertPool, want string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("mtls: server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("mtls: verify server certificate: %w", err)
	}
	got, err := IdentityOf(leaf)
	if err != nil {
		return fmt.Errorf("mtls: server certificate: %w", err)
	}
	if got != want {
		return fmt.Errorf("mtls: server identity is %q, want %q", got, want)
	}
	return nil
}

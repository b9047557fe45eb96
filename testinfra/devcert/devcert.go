// Package devcert issues the private CA and per-service certificates that
// the services use for mutual TLS in development and tests.
//
// Production certificates come from a real private CA (cert-manager in a
// cluster); these are for `make run` and the test suites only. Every leaf
// carries the service's identity as a URI SAN (spiffe://txfence/<service>),
// which is what the services authorize on, plus localhost names so that curl
// can reach a development stack.
package devcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/txfence/txfence/shared/mtls"
)

// CA is a private certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
}

// NewCA creates a self-signed CA valid for the given duration.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"txfence development"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key}, nil
}

// CertPEM is the CA certificate in PEM form, the trust anchor peers load.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA private key in PEM form.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// Leaf is an issued certificate and its key, both in PEM form.
type Leaf struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Issue creates a certificate for service, usable both as a TLS server and
// as a TLS client, with the URI SAN spiffe://txfence/<service>.
func (ca *CA) Issue(service string, validFor time.Duration) (Leaf, error) {
	id, err := url.Parse(mtls.IdentityURI(service))
	if err != nil {
		return Leaf{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("generate key for %s: %w", service, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: service, Organization: []string{"txfence development"}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id},
		DNSNames:     []string{"localhost", service},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return Leaf{}, fmt.Errorf("sign certificate for %s: %w", service, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: kp}, nil
}

// Files returns where WriteDir puts the files of service under dir.
func Files(dir, service string) mtls.Files {
	return mtls.Files{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, service+".pem"),
		Key:  filepath.Join(dir, service+"-key.pem"),
	}
}

// WriteDir makes sure dir holds a CA (ca.pem, ca-key.pem) and a certificate
// and key for each service. An existing CA is reused so certificates issued
// earlier stay valid; leaves are reissued when missing or expiring within a
// day. Keys are written with mode 0600.
func WriteDir(dir string, services []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, svc := range services {
		f := Files(dir, svc)
		if validFor(f.Cert, 24*time.Hour) {
			continue
		}
		leaf, err := ca.Issue(svc, 90*24*time.Hour)
		if err != nil {
			return err
		}
		if err := writeFile(f.Key, leaf.KeyPEM, 0o600); err != nil {
			return err
		}
		if err := writeFile(f.Cert, leaf.CertPEM, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func loadOrCreateCA(dir string) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if validFor(certFile, 30*24*time.Hour) {
		ca, err := loadCA(certFile, keyFile)
		if err == nil {
			return ca, nil
		}
	}
	ca, err := NewCA("txfence development CA", 5*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	kp, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyFile, kp, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certFile, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	// Leaves signed by an older CA are now useless: drop them so they are reissued.
	olds, _ := filepath.Glob(filepath.Join(dir, "*.pem"))
	for _, f := range olds {
		if f != certFile && f != keyFile {
			_ = os.Remove(f)
		}
	}
	return ca, nil
}

func loadCA(certFile, keyFile string) (*CA, error) {
	cert, err := readCert(certFile)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, errors.New("no PEM block in CA key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	return &CA{Cert: cert, key: signer}, nil
}

func readCert(file string) (*x509.Certificate, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", file)
	}
	return x509.ParseCertificate(block.Bytes)
}

// validFor reports whether the certificate in file exists and is still valid
// for at least d.
func validFor(file string, d time.Duration) bool {
	cert, err := readCert(file)
	return err == nil && time.Now().Add(d).Before(cert.NotAfter)
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeFile replaces file atomically, so a service reloading it never reads
// half a certificate.
func writeFile(file string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of files the control plane needs; they are made once per state directory
// and kept across up/down so that kubeconfigs handed out earlier stay valid.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string     { return p.path("ca.crt") }
func (p pki) caKey() string      { return p.path("ca.key") }
func (p pki) serverCert() string { return p.path("apiserver.crt") }
func (p pki) serverKey() string  { return p.path("apiserver.key") }
func (p pki) adminCert() string  { return p.path("admin.crt") }
func (p pki) adminKey() string   { return p.path("admin.key") }
func (p pki) kcmCert() string    { return p.path("controller-manager.crt") }
func (p pki) kcmKey() string     { return p.path("controller-manager.key") }
func (p pki) saKey() string      { return p.path("service-account.key") }
func (p pki) saPub() string      { return p.path("service-account.pub") }

func (p pki) ensure() error {
	if _, err := os.Stat(p.saPub()); err == nil {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "informerd-local-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCert(p.caCert(), caDER); err != nil {
		return err
	}
	if err := writeKey(p.caKey(), caKey); err != nil {
		return err
	}

	leaf := func(certPath, keyPath string, serial int64, subject pkix.Name, server bool) error {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      subject,
			NotBefore:    now,
			NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCert(certPath, der); err != nil {
			return err
		}
		return writeKey(keyPath, key)
	}
	if err := leaf(p.serverCert(), p.serverKey(), 2, pkix.Name{CommonName: "kube-apiserver"}, true); err != nil {
		return err
	}
	if err := leaf(p.adminCert(), p.adminKey(), 3, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, false); err != nil {
		return err
	}
	// The controller manager runs each controller under its own ServiceAccount
	// (--use-service-account-credentials), as real clusters do; its own identity only needs
	// the bootstrap role system:kube-controller-manager, which RBAC grants to this name.
	if err := leaf(p.kcmCert(), p.kcmKey(), 4, pkix.Name{CommonName: "system:kube-controller-manager"}, false); err != nil {
		return err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(p.saKey(), saKey); err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	// Written last: its presence means the whole set exists.
	return os.WriteFile(p.saPub(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeKey(path string, key *rsa.PrivateKey) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

// kubeconfig renders a kubeconfig for server using a client certificate.
func kubeconfig(server, caPath, certPath, keyPath, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: informerd-local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: informerd-local
  context:
    cluster: informerd-local
    user: %s
current-context: informerd-local
`, server, caPath, user, certPath, keyPath, user)
}

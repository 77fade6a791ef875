package main

// The certificates the nodes and the tests need, signed by the control plane's own CA, so that
// nothing new has to be trusted: the kubelets' client certificates and, in the tests, the
// serving certificate of a webhook the apiserver calls.

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// pki signs certificates with the control plane's CA (`cluster up` wrote it under
// CLUSTER-DIR/pki).
type pki struct{ clusterDir, dir string }

func (p pki) caCert() string { return filepath.Join(p.clusterDir, "pki", "ca.crt") }
func (p pki) caKey() string  { return filepath.Join(p.clusterDir, "pki", "ca.key") }

// kubeconfig writes a client certificate for user (in groups) and a kubeconfig for server
// using it, named file.kubeconfig, and returns its path.
func (p pki) kubeconfig(file, user string, groups []string, server string) (string, error) {
	certPath, keyPath, err := p.issue(file, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.dir, file+".kubeconfig")
	return path, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
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
`, server, p.caCert(), user, certPath, keyPath, user)), 0o600)
}

// issue signs tmpl (its serial and validity set here) for a new key with the control plane's
// CA and writes the certificate and key as file.crt and file.key in the pki's directory.
func (p pki) issue(file string, tmpl *x509.Certificate) (certPath, keyPath string, err error) {
	caCert, caKey, err := p.ca()
	if err != nil {
		return "", "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
		return "", "", err
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = tmpl.NotBefore.Add(365 * 24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	certPath = filepath.Join(p.dir, file+".crt")
	keyPath = filepath.Join(p.dir, file+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func (p pki) ca() (*x509.Certificate, *rsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(p.caKey())
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s: no PEM block", p.caCert(), p.caKey())
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

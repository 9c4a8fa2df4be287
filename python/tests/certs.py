"""Test certificates: a CA, a server certificate for 127.0.0.1 (and
localhost) and a client certificate signed by it, and a second CA that
signed neither, all PEM files in a directory, valid for two days.

Made with the ``openssl`` command when there is one, else with a small Go
program (``go run``, standard library only), since neither the tests nor
the package depend on Python's ``cryptography``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certs", "make_certs"]


@dataclass
class Certs:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str  # signed neither certificate


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    if shutil.which("openssl"):
        _openssl(d)
    elif shutil.which("go"):
        _go(d)
    else:  # pragma: no cover
        import pytest

        pytest.skip("neither openssl nor go to make test certificates")
    f = lambda name: str(d / name)  # noqa: E731
    return Certs(f("ca.pem"), f("server.pem"), f("server.key"), f("client.pem"), f("client.key"), f("other-ca.pem"))


_CA_CNF = """
[req]
distinguished_name = dn
prompt = no
[dn]
CN = {cn}
[ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""

_LEAF_CNF = """
[req]
distinguished_name = dn
prompt = no
[dn]
CN = {cn}
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = {usage}
subjectAltName = {san}
authorityKeyIdentifier = keyid
"""

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _run(cmd, cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")


def _openssl(d: Path) -> None:
    for ca in ("ca", "other-ca"):
        (d / f"{ca}.cnf").write_text(_CA_CNF.format(cn=f"stoker test {ca}"))
        _run(["openssl", "req", "-x509", "-config", f"{ca}.cnf", "-extensions", "ext", *_EC,
              "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2"], d)
    leaves = {
        "server": ("127.0.0.1", "serverAuth", "IP:127.0.0.1,DNS:localhost"),
        "client": ("stoker test client", "clientAuth", "DNS:client.test"),
    }
    for serial, (name, (cn, usage, san)) in enumerate(leaves.items(), start=2):
        (d / f"{name}.cnf").write_text(_LEAF_CNF.format(cn=cn, usage=usage, san=san))
        _run(["openssl", "req", "-new", "-config", f"{name}.cnf", *_EC, "-keyout", f"{name}.key",
              "-out", f"{name}.csr"], d)
        _run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
              "-set_serial", str(serial), "-days", "2", "-extfile", f"{name}.cnf", "-extensions", "ext",
              "-out", f"{name}.pem"], d)


_GO = r"""package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func write(dir, name, typ string, der []byte) {
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		panic(err)
	}
}

func main() {
	dir := os.Args[1]
	now := time.Now().Add(-time.Hour)
	ca := func(name string) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stoker test " + name},
			NotBefore: now, NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		write(dir, name+".pem", "CERTIFICATE", der)
		cert, _ := x509.ParseCertificate(der)
		return cert, key
	}
	caCert, caKey := ca("ca")
	ca("other-ca")
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP, dns []string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now, NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			panic(err)
		}
		write(dir, name+".pem", "CERTIFICATE", der)
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		write(dir, name+".key", "PRIVATE KEY", kder)
	}
	leaf("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	leaf("client", 3, x509.ExtKeyUsageClientAuth, nil, []string{"client.test"})
}
"""


def _go(d: Path) -> None:
    src = d / "gencerts" / "main.go"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(_GO)
    env = dict(os.environ, GOTOOLCHAIN=os.environ.get("GOTOOLCHAIN", "auto"))
    r = subprocess.run(["go", "run", str(src), str(d)], cwd=src.parent, env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"go run gencerts: exit {r.returncode}\n{r.stderr}")

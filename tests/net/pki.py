"""
A test CA made with openssl, and one server certificate signed by it for
every test name and address.
"""
import os
import subprocess

from netns import ALIASES, METADATA, SITES


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make(tmp):
    """(ca.pem, server cert, server key) in tmp."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=stexec network test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=tmp)
    names = list(SITES) + list(ALIASES) + ["localhost"]
    ips = list(SITES.values()) + [METADATA, "127.0.0.1"]
    san = ",".join(["DNS:" + n for n in names] + ["IP:" + a for a in ips])
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid,issuer\n"
                "subjectAltName=" + san + "\n")
    _openssl("req", "-new", *ec, "-keyout", "srv.key", "-out", "srv.csr",
             "-subj", "/CN=www.test", cwd=tmp)
    _openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey",
             "ca.key", "-CAcreateserial", "-out", "srv.pem", "-days", "2",
             "-extfile", "ext.cnf", cwd=tmp)
    return tuple(os.path.join(tmp, n) for n in ("ca.pem", "srv.pem",
                                                "srv.key"))

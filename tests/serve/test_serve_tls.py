"""``rewardzoo serve --ssl-keyfile/--ssl-certfile`` on 127.0.0.1 with a self-signed certificate made here, and the
start-up warning when a token would travel in clear beyond this machine."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
import time

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
x509 = pytest.importorskip("cryptography.x509")

from rewardzoo.serve.options import binding_notice

from .helpers import READY_WITHIN_S, Server, free_port


def self_signed(folder):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return folder / "key.pem", folder / "cert.pem"


def test_serve_over_tls_answers_https_and_refuses_plain_http(tmp_path):
    key, cert = self_signed(tmp_path)
    (tmp_path / "c.yaml").write_text("rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n")
    server = Server(tmp_path / "c.yaml", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert)).start(wait=False)
    context = ssl.create_default_context(cafile=str(cert))
    try:
        deadline, status = time.monotonic() + READY_WITHIN_S, None
        while time.monotonic() < deadline and status != 200:
            assert server.proc.poll() is None, server.output()
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
                conn.request("GET", "/ready")
                status = conn.getresponse().status
                conn.close()
            except (OSError, http.client.HTTPException):
                time.sleep(0.2)
        assert status == 200
        plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        with pytest.raises((OSError, http.client.HTTPException)):
            plain.request("GET", "/health")
            plain.getresponse().read()
        assert "https://127.0.0.1" in server.output()
    finally:
        server.stop()


def test_a_token_in_clear_beyond_loopback_is_warned_about():
    assert "WARNING" in binding_notice("0.0.0.0", 8765, token=True, tls=False)
    assert "WARNING" not in binding_notice("0.0.0.0", 8765, token=True, tls=True)
    assert "WARNING" not in binding_notice("127.0.0.1", 8765, token=True, tls=False)
    assert binding_notice("0.0.0.0", 8765, token=True, tls=True).split(" — ")[0].endswith("https://0.0.0.0:8765")


@pytest.mark.parametrize("case", ["encrypted", "other_key", "not_pem"])
def test_a_key_the_server_cannot_use_is_one_line_before_it_starts(tmp_path, case):
    """An encrypted key made OpenSSL ask for a password (a hang without a terminal, a traceback with one); a key
    that is not the certificate's, or a file that is not PEM, failed deep in uvicorn's start."""
    import subprocess
    import sys

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key, cert = self_signed(tmp_path)
    if case == "encrypted":
        private = serialization.load_pem_private_key(key.read_bytes(), None)
        encryption = serialization.BestAvailableEncryption(b"secret")
        key.write_bytes(
            private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        )
    elif case == "other_key":
        other = ec.generate_private_key(ec.SECP256R1())
        none = serialization.NoEncryption()
        key.write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, none))
    else:
        key.write_text("not a key\n")
    (tmp_path / "c.yaml").write_text("rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n")
    port = str(free_port())  # never bound: the files are refused before the server starts
    args = ["serve", str(tmp_path / "c.yaml"), "--port", port, "--ssl-keyfile", str(key), "--ssl-certfile", str(cert)]
    out = subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    said = {
        "encrypted": "is encrypted (it asks for a password)",
        "other_key": "cannot be loaded",
        "not_pem": "cannot be",
    }
    assert out.returncode == 2 and said[case] in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1

"""A token service for distribution's ``auth: token`` mode (the Docker registry token spec), for tests.

It checks HTTP Basic credentials and issues ES256 JWTs carrying the signing certificate in ``x5c``; the
registry trusts them through its ``rootcertbundle`` (the same self-signed certificate). Listens on
127.0.0.1 only, in a daemon thread; counts the token requests it answers.
"""

from __future__ import annotations

import base64
import datetime
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Issues registry tokens to one user; ``requests`` counts the token requests answered."""

    def __init__(self, *, service: str, issuer: str, username: str, password: str) -> None:
        self.service = service
        self.issuer = issuer
        self._username = username
        self._password = password
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trtguard test token signer")])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.requests = 0
        self.lifetime = 300
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def realm(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/token"

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _token(self, subject: str, scopes: list[str]) -> str:
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind == "repository" and name:
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64.b64encode(self.certificate.public_bytes(serialization.Encoding.DER)).decode()],
        }
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.service,
            "exp": now + self.lifetime,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                expected = base64.b64encode(f"{server._username}:{server._password}".encode()).decode()
                if parts.path != "/token" or self.headers.get("Authorization") != f"Basic {expected}":
                    self._answer(401, {"details": "bad credentials"})
                    return
                if query.get("service") != [server.service]:
                    self._answer(400, {"details": "wrong service"})
                    return
                with server._lock:
                    server.requests += 1
                token = server._token(server._username, query.get("scope", []))
                self._answer(200, {"token": token, "access_token": token, "expires_in": server.lifetime})

            def _answer(self, status: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

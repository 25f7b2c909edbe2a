#!/usr/bin/env python3
"""An OAuth issuer for scripts/bench.sh's OAuth load: its discovery document and key set over
loopback HTTP, and one RS256 access token for AUDIENCE (toolgate's resource URI), signed with
an RSA key made at start by the openssl command line (no Python packages beyond the standard
library). Not a test fixture: the tests use a real provider (scripts/clients/oidc_provider.mjs)
and tests/common/issuer.rs.

    oauth_issuer.py AUDIENCE SCOPE GROUP

Prints `issuer: URL` and `token: JWT` once it listens, then serves until killed. The token
lives 50 minutes (toolgate refuses lifetimes over its `max_token_lifetime`, 1 h by default).
"""

import base64
import json
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KID = "bench-key-1"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rsa_key(directory: str) -> tuple[str, dict]:
    """A new 2048-bit key's PEM path, and its public half as a JWK."""
    pem = f"{directory}/key.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", pem],
                   check=True, capture_output=True)
    modulus = subprocess.run(["openssl", "rsa", "-in", pem, "-noout", "-modulus"],
                             check=True, capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    jwk = {"kty": "RSA", "kid": KID, "alg": "RS256", "use": "sig",
           "n": b64(bytes.fromhex(modulus)), "e": b64((65537).to_bytes(3, "big"))}
    return pem, jwk


def signed(pem: str, claims: dict) -> str:
    header = {"alg": "RS256", "typ": "at+jwt", "kid": KID}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", pem], input=signing_input.encode(),
                               check=True, capture_output=True).stdout
    return f"{signing_input}.{b64(signature)}"


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: oauth_issuer.py AUDIENCE SCOPE GROUP")
    audience, scope, group = sys.argv[1:]
    documents: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            body = documents.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer = f"http://127.0.0.1:{server.server_address[1]}"
    documents["/.well-known/openid-configuration"] = json.dumps(
        {"issuer": issuer, "jwks_uri": f"{issuer}/jwks", "authorization_endpoint": f"{issuer}/authorize",
         "token_endpoint": f"{issuer}/token", "response_types_supported": ["code"],
         "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"]}).encode()
    now = int(time.time())
    # The private key is needed for one signature only: it is gone before the issuer serves.
    with tempfile.TemporaryDirectory(prefix="bench-issuer-") as directory:
        pem, jwk = rsa_key(directory)
        token = signed(pem, {"iss": issuer, "sub": "bench-user", "aud": audience, "iat": now, "nbf": now,
                             "exp": now + 3000, "scope": scope, "groups": [group], "client_id": "bench"})
    documents["/jwks"] = json.dumps({"keys": [jwk]}).encode()
    print(f"issuer: {issuer}\ntoken: {token}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

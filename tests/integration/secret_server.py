"""A loopback OpenAI-style server for the secrets test: it requires the run's keys and echoes them back.

``python secret_server.py AZ_KEY BEARER_KEY HEADER_KEY`` prints its port on stdout, then serves until killed:
``GET /v1/models`` lists model ``m``; ``POST /v1/chat/completions`` answers 401 with every key echoed in the error
body when a key is missing or wrong, and also for every third request after the warm-up (max_tokens 16), else a
short stream. Bounded: each answer sleeps 20 ms (at most ~50 requests a second per connection).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AZ, BEARER, HDR = sys.argv[1:4]
COUNT = itertools.count()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _keys_ok(self) -> bool:
        return (self.headers.get("api-key") == AZ and self.headers.get("authorization") == f"Bearer {BEARER}"
                and self.headers.get("x-api-key") == HDR)

    def _reject(self) -> None:
        msg = (f"Incorrect API key provided: api-key {self.headers.get('api-key')}, x-api-key "
               f"{self.headers.get('x-api-key')}, Authorization: {self.headers.get('authorization')}")
        self._send(401, json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode(),
                   "application/json")

    def do_GET(self) -> None:
        if not self._keys_ok():
            self._reject()
            return
        self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode(),
                   "application/json")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        time.sleep(0.02)
        warm = body.get("max_tokens") == 16
        if not self._keys_ok() or (not warm and next(COUNT) % 3 == 0):
            self._reject()
            return
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": w}, "finish_reason": None}]}
                  for w in ("Hello", " there", " friend")]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        chunks.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
        sse = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self._send(200, sse, "text/event-stream")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()

"""What the Python SDK scripts (a2a_client.py for a2a-sdk 0.3.x, a2a_client_v1.py for 1.x) share:
the checks, the wire watch, the credential checks and the command line. SDK-free: it imports
only httpx (which both SDK lines bring) and the standard library."""

import argparse
import asyncio
import json
import os
import sys
import traceback

CAPSULE_EXTENSION_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"
CREDENTIAL_SESSION = "mur-sdk-interop"
UNKNOWN_TASK = "tsk_00000000000000000000000000000000"


class Mismatch(Exception):
    """A check that did not hold."""


class Checks:
    def __init__(self):
        self.passed = []

    def expect(self, condition, what, got=None):
        if not condition:
            raise Mismatch(f"{what} (got {got!r})" if got is not None else what)
        self.passed.append(what)


class Wire:
    """httpx event hooks: the A2A-Version of every request; every JSON-RPC response must be JSON
    and carry its request's id. `check_shapes` (none here) looks further into each answer."""

    def __init__(self):
        self.exchanges = []
        self.versions = set()
        self.problems = []

    def hooks(self):
        return {"request": [self.on_request], "response": [self.on_response]}

    async def on_request(self, request):
        self.versions.add(request.headers.get("a2a-version"))

    async def on_response(self, response):
        request = response.request
        if request.method != "POST":
            return
        await response.aread()
        try:
            sent = json.loads(request.content)
        except ValueError:
            sent = {}
        method = sent.get("method")
        entry = {"method": method, "status": response.status_code,
                 "authorization": "authorization" in request.headers}
        self.exchanges.append(entry)
        if response.status_code != 200:
            entry["www_authenticate"] = response.headers.get("www-authenticate")
            return
        ctype = response.headers.get("content-type", "")
        if not ctype.startswith("application/json"):
            self.problems.append(f"{method}: content-type {ctype!r}")
        try:
            answer = json.loads(response.content)
        except ValueError:
            self.problems.append(f"{method}: the body is not JSON")
            return
        if answer.get("jsonrpc") != "2.0":
            self.problems.append(f"{method}: jsonrpc is {answer.get('jsonrpc')!r}")
        if answer.get("id") != sent.get("id"):
            self.problems.append(
                f"{method}: id {answer.get('id')!r} for request id {sent.get('id')!r}")
        self.check_shapes(method, answer, entry)

    def check_shapes(self, method, answer, entry):
        """Further checks of one JSON-RPC answer (problems appended to `self.problems`)."""

    def check_credentials(self, c):
        """With a token: every accepted request carried it; each refusal named Bearer."""
        posts = [x for x in self.exchanges if x["status"] == 200]
        c.expect(posts and all(x["authorization"] for x in posts),
                 "every accepted request carried the SDK's Authorization header", posts)
        refused = [x for x in self.exchanges if x["status"] == 401]
        c.expect(refused and all((x.get("www_authenticate") or "").startswith("Bearer")
                                 for x in refused),
                 "the 401 names the Bearer scheme", refused)

    def finish(self, c, summary):
        """The last check, and what the summary says of the wire."""
        c.expect(not self.problems, "wire: JSON answers echoing each request id", self.problems)
        summary["a2a_versions"] = sorted(map(str, self.versions))
        summary["rpc_calls"] = [f"{x['method']}:{x['status']}" for x in self.exchanges]
        summary["checks"] = len(c.passed)
        return summary


def main(doc, run):
    """The command line both scripts take: run `run(url, text, token, session_id)` (a coroutine
    returning the summary) and print one JSON line; 0 only if every check held."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("url", help="the door: host:port or http://host:port/")
    parser.add_argument("--text", default="hello from the a2a-sdk")
    parser.add_argument("--session-id", help="the session the card must name")
    parser.add_argument("--token-stdin", action="store_true",
                        help="read the bearer token from the first line of stdin")
    args = parser.parse_args()

    url = args.url if "://" in args.url else f"http://{args.url}"
    url = url.rstrip("/") + "/"
    token = None
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    elif os.environ.get("MUR_A2A_TOKEN"):
        token = os.environ["MUR_A2A_TOKEN"].strip()
    if token == "":
        print(json.dumps({"ok": False, "error": "an empty token"}))
        return 1

    try:
        summary = asyncio.run(run(url, args.text, token, args.session_id))
    except Mismatch as e:
        print(json.dumps({"ok": False, "mismatch": str(e)}))
        return 1
    except Exception as e:  # an SDK error is a failed interop, reported, never a crash
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    summary["ok"] = True
    print(json.dumps(summary))
    return 0

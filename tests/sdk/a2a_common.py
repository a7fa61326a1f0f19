"""What the Python SDK scripts (a2a_client.py for a2a-sdk 0.3.x, a2a_client_v1.py for 1.x) share:
the checks, the wire watch (event streams included), the credential checks, the stream's
events as the SDK delivers them, and the command line. SDK-free: it imports only httpx (which
both SDK lines bring) and the standard library."""

import argparse
import asyncio
import json
import os
import sys
import traceback
from importlib.metadata import version as dist_version

import httpx

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


class _TeeStream(httpx.AsyncByteStream):
    """A response body passed on to the SDK chunk by chunk as it arrives, a copy kept in `raw`."""

    def __init__(self, inner, raw):
        self.inner = inner
        self.raw = raw

    async def __aiter__(self):
        async for chunk in self.inner:
            self.raw.append(chunk)
            yield chunk

    async def aclose(self):
        await self.inner.aclose()


class _Tee(httpx.AsyncBaseTransport):
    """httpx's own transport, keeping a copy of every event stream (in the request's
    extensions, for `Wire.on_response`) without holding any of it back from the SDK."""

    def __init__(self):
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            request.extensions["mur_raw"] = raw = []
            response.stream = _TeeStream(response.stream, raw)
        return response

    async def aclose(self):
        await self.inner.aclose()


def sse_data(raw):
    """The `data` of each event of an event stream's bytes (comments and other fields skipped)."""
    text = b"".join(raw).decode("utf-8", "replace").replace("\r\n", "\n")
    found = []
    for block in text.split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in block.split("\n")
                if line.startswith("data:")]
        if data:
            found.append("\n".join(data))
    return found


class Wire:
    """httpx event hooks (and, with `transport()`, a copy of each event stream): the A2A-Version
    of every request; every JSON-RPC response, and every event of a stream, must be JSON-RPC 2.0
    and carry its request's id. `check_shapes` (none here) looks further into each answer."""

    def __init__(self):
        self.exchanges = []
        self.versions = set()
        self.problems = []
        self.streams = []

    def hooks(self):
        return {"request": [self.on_request], "response": [self.on_response]}

    @staticmethod
    def transport():
        """The transport for the httpx client, so that event streams are watched too."""
        return _Tee()

    async def on_request(self, request):
        self.versions.add(request.headers.get("a2a-version"))

    async def on_response(self, response):
        request = response.request
        if request.method != "POST":
            return
        try:
            sent = json.loads(request.content)
        except ValueError:
            sent = {}
        method = sent.get("method")
        entry = {"method": method, "status": response.status_code,
                 "authorization": "authorization" in request.headers}
        self.exchanges.append(entry)
        ctype = response.headers.get("content-type", "")
        if response.status_code == 200 and ctype.startswith("text/event-stream"):
            # Never read here: the SDK must get each event as it comes. The copy the transport
            # keeps is checked once the stream is over.
            self.streams.append((sent, entry, request.extensions.get("mur_raw")))
            return
        await response.aread()
        if response.status_code != 200:
            entry["www_authenticate"] = response.headers.get("www-authenticate")
            return
        if not ctype.startswith("application/json"):
            self.problems.append(f"{method}: content-type {ctype!r}")
        try:
            answer = json.loads(response.content)
        except ValueError:
            self.problems.append(f"{method}: the body is not JSON")
            return
        self.check_answer(sent, answer, entry)

    def check_answer(self, sent, answer, entry):
        """One JSON-RPC answer (or event of a stream) to request `sent`."""
        method = sent.get("method")
        if answer.get("jsonrpc") != "2.0":
            self.problems.append(f"{method}: jsonrpc is {answer.get('jsonrpc')!r}")
        if answer.get("id") != sent.get("id"):
            self.problems.append(
                f"{method}: id {answer.get('id')!r} for request id {sent.get('id')!r}")
        self.check_shapes(method, answer, entry)

    def check_streams(self):
        """Every event of every stream: JSON-RPC, the request's id, a result."""
        for sent, entry, raw in self.streams:
            if raw is None:
                self.problems.append(f"{entry['method']}: an event stream not watched")
                continue
            entry["events"] = 0
            for data in sse_data(raw):
                entry["events"] += 1
                try:
                    answer = json.loads(data)
                except ValueError:
                    self.problems.append(f"{entry['method']}: an event is not JSON: {data!r}")
                    continue
                if "result" not in answer:
                    self.problems.append(f"{entry['method']}: an event without a result: {data}")
                self.check_answer(sent, answer, entry)

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
        self.check_streams()
        c.expect(not self.problems, "wire: JSON answers echoing each request id", self.problems)
        summary["a2a_versions"] = sorted(map(str, self.versions))
        summary["rpc_calls"] = [f"{x['method']}:{x['status']}" for x in self.exchanges]
        summary["stream_events"] = [x["events"] for _, x, _ in self.streams if "events" in x]
        summary["checks"] = len(c.passed)
        return summary


async def stream_events(stream, normalize):
    """Drain `stream`, the SDK's own iterator of a streaming call, and return its events as
    `normalize` (event -> (kind, fields)) sees them, in the order the SDK gave them: `task`
    {state, id}, `status` {state, final?}, `artifact` {text, append, last}. Each is also printed
    at once, as a line `{"event": INDEX, ...}` on stdout, and the first artifact event with text
    once more as `{"first_chunk": TEXT, "event": INDEX}`, while the stream is still open: the test
    waits for that line before it lets the handler end."""
    seen = []
    async for event in stream:
        kind, fields = normalize(event)
        seen.append({"kind": kind, **{k: v for k, v in fields.items() if v is not None}})
        print(json.dumps({"event": len(seen) - 1, **seen[-1]}), flush=True)
        if kind == "artifact" and fields.get("text") and \
                not any(e["kind"] == "artifact" and e.get("text") for e in seen[:-1]):
            print(json.dumps({"first_chunk": fields["text"], "event": len(seen) - 1}), flush=True)
    return seen


async def handler_pid(path, seconds=30.0):
    """The pid the slow handler of a `--cancel` run wrote to `path` (its background `sleep`),
    once it is there: the handler is then running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            text = open(path).read().strip()
            if text.isdigit():
                return int(text)
        except FileNotFoundError:
            pass
        if loop.time() > deadline:
            raise Mismatch(f"the handler wrote no pid to {path} within {seconds} s")
        await asyncio.sleep(0.05)


def process_left(pid):
    """None when process `pid` is gone (reaped); otherwise its /proc state (a zombie counts as
    left: its parent has not reaped it yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return "state " + f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "alive"


async def until_state(get, want, seconds=30.0):
    """Poll `get()` (a coroutine returning a state name) until it returns `want` or `seconds`
    pass; the last state seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        state = await get()
        if state == want or loop.time() > deadline:
            return state
        await asyncio.sleep(0.05)


def watched_http(wire):
    """The httpx client the SDK is given: 30 s timeouts, every exchange watched by `wire`."""
    return httpx.AsyncClient(timeout=30.0, event_hooks=wire.hooks(), transport=wire.transport())


def summary_of(url, protocol, **more):
    """A summary's start: the SDK (as installed), the door, the A2A generation."""
    return {"sdk": f"a2a-sdk {dist_version('a2a-sdk')}", "url": url, "protocol": protocol, **more}


def main(doc, run, stream, cancel):
    """The command line both scripts take: run `run(url, text, token, session_id)` (a coroutine
    returning the summary), or with `--stream` `stream(url, text, token, session_id)`, or with
    `--cancel PID_FILE` `cancel(url, text, pid_file)`, and print one JSON line (the summary; a
    stream's first chunk is a line before it); 0 only if every check held."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("url", help="the door: host:port or http://host:port/")
    parser.add_argument("--text", default="hello from the a2a-sdk")
    parser.add_argument("--session-id", help="the session the card must name")
    parser.add_argument("--token-stdin", action="store_true",
                        help="read the bearer token from the first line of stdin")
    parser.add_argument("--stream", action="store_true",
                        help="send the text with the SDK's streaming call instead, and report "
                        "every event it delivers")
    parser.add_argument("--cancel", metavar="PID_FILE",
                        help="send the text without blocking to a slow handler that writes the "
                        "pid of its child to PID_FILE, cancel the running task, and report the "
                        "state the SDK returns")
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
        if args.cancel:
            summary = asyncio.run(cancel(url, args.text, args.cancel))
        else:
            call = stream if args.stream else run
            summary = asyncio.run(call(url, args.text, token, args.session_id))
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

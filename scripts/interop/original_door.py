#!/usr/bin/env python3
"""A door that answers as the original runtime's (murmur-cli / capsule-runtime 0.8.0) does.

Used by scripts/interop-original.sh to point mur's host applets at something that speaks the
original's wire, because a real original session needs its wasm drivers and artifacts. Every
answer below follows capsule-runtime 0.8.0's source (identity.rs, a2a.rs, streaming.rs,
control_plane.rs, running.rs); nothing of it is copied, only the facts:

- A2A 1.0 only: a JSON-RPC request is served only with exactly one `A2A-Version: 1.0` (or 1.0.N)
  header, checked before the method (-32009 VersionNotSupported, with a google.rpc.ErrorInfo).
  Method names are matched exactly; anything else (`tasks/cancel`, `session/stop`) is -32601.
- `CancelTask`: the task, canceled, at once; -32001 for an unknown id, -32002 with ErrorInfo
  metadata {taskId, state} for one that had already ended.
- `murmur.StopSession`: cancels every live task and answers {session_id, canceled, residue},
  echoing the door extension in `A2A-Extensions`; it does NOT end the process (the caller's
  SIGTERM does).
- `murmur.WatchSession`: SSE whose head lists the door and stream extensions; an unnumbered
  `connection-ack` (role observer) `message` carrier, the buffered events after Last-Event-ID,
  then live ones: a task's streamed text as `text` frames on `statusUpdate`s, its answer as the
  `response` artifactUpdate, its end as a terminal statusUpdate; `capsule-closed` when the
  session's event stream closes; `:heartbeat` every 15 s.
- `/control`: the control token from `<session>.control` as a bearer; GET lists settings and
  secrets as arrays of {name, value} / {name, set}; PUT /control/settings/NAME takes
  application/json {"value": V} and answers {name, previous, value, applies_from}; secrets are
  PUT (raw body, one line of visible ASCII) / DELETE, from loopback only.
- A running record in ~/.murmur/running/<session>.json with the original's ten required keys
  (records_dir included), 0600 in 0700 directories; removed with the control token on SIGTERM.

Also served, to start tasks for the checks: `SendMessage` (answers at once with the working
task) and `GetTask`. A task's text says what its handler does: `lines N` streams "line 1".."line
N" 0.3 s apart and completes with them; anything else works until canceled (at most 60 s).

Usage: original_door.py READY_FILE [--settings a,b] [--secrets A,B]
  HOME must be set (the record goes under $HOME/.murmur, or $MURMUR_HOME). Prints nothing; writes
  {"session_id", "url", "pid"} to READY_FILE once it serves.
"""

import json
import os
import secrets
import signal
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DOCS = "https://docs.murmur.nexus/reference/"
DOOR_EXT = DOCS + "agent-card/#murmur-door-v1"
CAPSULE_EXT = DOCS + "agent-card/#murmur-capsule-v1"
STREAM_EXT = DOCS + "streaming-protocol/#murmur-stream-v1"
METHODS = ["SendMessage", "murmur.WatchSession", "GetTask", "CancelTask", "murmur.StopSession"]
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
HEARTBEAT_SECS = 15
A2A_ERRORS = {-32001: "TASK_NOT_FOUND", -32002: "TASK_NOT_CANCELABLE", -32009: "VERSION_NOT_SUPPORTED"}


def now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def uuid7_hex():
    ms = int(time.time() * 1000)
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    return raw.hex()


def start_token(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 1:].split()[22 - 3]


def a2a_error(code, message, metadata):
    return {"code": code, "message": message, "data": [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": A2A_ERRORS[code],
        "domain": "a2a-protocol.org", "metadata": metadata}]}


class Session:
    """The session's tasks and its numbered event buffer; one lock for both."""

    def __init__(self, session_id):
        self.session_id = session_id
        self.cond = threading.Condition()
        self.tasks = {}
        self.events = []
        self.closed = False

    def emit(self, result):
        """Append one event to the buffer; every watcher is woken. Caller holds the lock."""
        self.events.append((len(self.events) + 1, json.dumps(result)))
        self.cond.notify_all()

    def status(self, task, message=None):
        update = {"taskId": task["id"], "contextId": task["contextId"], "status": dict(task["status"])}
        if message:
            update["status"]["message"] = {
                "messageId": "msg_" + uuid7_hex(), "contextId": task["contextId"], "taskId": task["id"],
                "role": "ROLE_AGENT", "parts": [{"text": message, "mediaType": "text/plain"}]}
        self.emit({"statusUpdate": update})

    def set_state(self, task, state, message=None):
        task["status"] = {"state": state, "timestamp": now()}
        self.status(task, message)

    def start(self, text):
        tid, ctx = "tsk_" + uuid7_hex(), "ctx_" + uuid7_hex()
        task = {"id": tid, "contextId": ctx, "status": {"state": "TASK_STATE_WORKING", "timestamp": now()}}
        with self.cond:
            self.tasks[tid] = task
            self.status(task)
        threading.Thread(target=self.run, args=(task, text), daemon=True).start()
        return dict(task)

    def run(self, task, text):
        words = text.split()
        lines = int(words[1]) if len(words) == 2 and words[0] == "lines" and words[1].isdigit() else None
        answer, deadline = [], time.monotonic() + 60
        i = 0
        while lines is None or i < lines:
            time.sleep(0.3)
            with self.cond:
                if task["status"]["state"] in TERMINAL or time.monotonic() > deadline:
                    return
                if lines is not None:
                    i += 1
                    answer.append(f"line {i}")
                    frame = {"frame": "text", "text": f"line {i}\n", "final": False}
                    self.emit({"statusUpdate": {
                        "taskId": task["id"], "contextId": task["contextId"],
                        "status": {"state": "TASK_STATE_WORKING", "timestamp": now()},
                        "metadata": {STREAM_EXT: frame}}})
        with self.cond:
            if task["status"]["state"] in TERMINAL:
                return
            self.emit({"artifactUpdate": {
                "taskId": task["id"], "contextId": task["contextId"], "lastChunk": True,
                "artifact": {"artifactId": "response", "name": "response",
                             "parts": [{"text": "\n".join(answer), "mediaType": "text/plain"}]}}})
            self.set_state(task, "TASK_STATE_COMPLETED", "task completed")

    def cancel(self, tid):
        """CancelTask's outcome: (result, error)."""
        with self.cond:
            task = self.tasks.get(tid)
            if task is None:
                return None, a2a_error(-32001, "Task not found", {"taskId": tid})
            state = task["status"]["state"]
            if state in TERMINAL:
                return None, a2a_error(-32002, f"Task cannot be canceled: it is already {state}",
                                       {"taskId": tid, "state": state})
            self.set_state(task, "TASK_STATE_CANCELED")
            return dict(task), None

    def cancel_every_live(self):
        with self.cond:
            live = [t for t in self.tasks.values() if t["status"]["state"] not in TERMINAL]
            for task in live:
                self.set_state(task, "TASK_STATE_CANCELED")
            return [t["id"] for t in live]

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class Control:
    """The control plane of a capsule declaring `control:`; settings hold JSON values."""

    def __init__(self, token, settings, secret_names):
        self.token = token
        self.settings = {name: None for name in settings}
        self.secrets = {name: None for name in secret_names}


def carrier(frame):
    """A frame that belongs to no task, as the original carries it: an agent message."""
    return {"message": {"messageId": "msg_" + uuid7_hex(), "role": "ROLE_AGENT",
                        "parts": [{"text": frame["frame"], "mediaType": "text/plain"}],
                        "metadata": {STREAM_EXT: frame}}}


def card(session_id, url):
    return {
        "name": "interop-door", "description": "Murmur capsule interop-door 0.8.0", "version": "0.8.0",
        "supportedInterfaces": [{"url": f"http://{url}", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": False, "pushNotifications": False, "extendedAgentCard": False, "extensions": [
            {"uri": DOOR_EXT, "required": False, "params": {"methods": METHODS, "peerTasks": False}},
            {"uri": CAPSULE_EXT, "required": False, "params": {"sessionId": session_id, "tools": [],
                                                              "shell": False, "network": False, "planes": []}},
            {"uri": STREAM_EXT, "required": False, "params": {"frames": ["text", "connection-ack", "capsule-closed"]}},
        ]},
        "securitySchemes": {}, "securityRequirements": [],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "task", "name": "Run a task", "description": "Runs one task.", "tags": ["task"]}],
    }


class Door(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    session: Session = None
    control: Control = None
    url = ""

    def log_message(self, *args):
        pass

    def answer(self, status, body, extensions=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        if extensions:
            self.send_header("A2A-Extensions", ", ".join(extensions))
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def body(self):
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def do_GET(self):
        if self.path == "/.well-known/agent-card.json":
            return self.answer(200, card(self.session.session_id, self.url))
        if self.path.startswith("/control"):
            return self.control_plane()
        self.answer(404, {"error": "not found"})

    def do_PUT(self):
        self.control_plane() if self.path.startswith("/control") else self.answer(404, {})

    def do_DELETE(self):
        self.control_plane() if self.path.startswith("/control") else self.answer(404, {})

    def control_plane(self):
        ctl = self.control
        if ctl is None:
            return self.answer(404, {"error": "this capsule declares no control: block"})
        auth = self.headers.get_all("authorization") or []
        if len(auth) != 1 or auth[0] != f"Bearer {ctl.token}":
            return self.answer(401, {"error": "the control surface takes this session's control token "
                                              "as Authorization: Bearer"})
        path = self.path.split("?")[0]
        if path == "/control":
            if self.command != "GET":
                return self.answer(405, {"error": "this control resource answers GET"})
            return self.answer(200, {
                "session_id": self.session.session_id,
                "settings": [{"name": n, "value": v} for n, v in ctl.settings.items()],
                "secrets": [{"name": n, "set": v is not None} for n, v in ctl.secrets.items()]})
        if path.startswith("/control/settings/"):
            name = path[len("/control/settings/"):]
            if name not in ctl.settings:
                return self.answer(404, {"error": "this capsule's control: block does not declare that setting"})
            if self.command != "PUT":
                return self.answer(405, {"error": "this control resource answers PUT"})
            if "application/json" not in (self.headers.get("content-type") or ""):
                return self.answer(415, {"error": "a setting is sent as content-type: application/json"})
            try:
                value = json.loads(self.body())["value"]
            except (ValueError, KeyError, TypeError):
                return self.answer(422, {"error": 'a setting body is a JSON object {"value": <value>}'})
            previous, ctl.settings[name] = ctl.settings[name], value
            return self.answer(200, {"name": name, "previous": previous, "value": value,
                                     "applies_from": "next_inference_call"})
        if path.startswith("/control/secrets/"):
            name = path[len("/control/secrets/"):]
            if name not in ctl.secrets:
                return self.answer(404, {"error": "this capsule's control: block does not declare that secret"})
            if self.command not in ("PUT", "DELETE"):
                return self.answer(405, {"error": "this control resource answers PUT, DELETE"})
            if self.client_address[0] not in ("127.0.0.1", "::1"):
                return self.answer(403, {"error": "a secret is accepted only over a loopback connection"})
            if self.command == "DELETE":
                ctl.secrets[name] = None
                return self.answer(200, {"name": name, "set": False})
            value = self.body()
            if not value or not all(0x20 <= b < 0x7F for b in value):
                return self.answer(422, {"error": "a secret is one line of visible ASCII and spaces, with no "
                                                  "control bytes; the value is not echoed"})
            replaced, ctl.secrets[name] = ctl.secrets[name] is not None, value
            return self.answer(200, {"name": name, "set": True, "replaced": replaced})
        self.answer(404, {"error": "no control resource at this path"})

    def do_POST(self):
        raw = self.body()
        try:
            req = json.loads(raw)
            rid, method, params = req.get("id"), req["method"], req.get("params", {})
        except (ValueError, KeyError, TypeError, AttributeError):
            return self.answer(200, {"jsonrpc": "2.0", "id": None,
                                     "error": {"code": -32700, "message": "Parse error"}})
        versions = [v.strip() for v in self.headers.get_all("A2A-Version") or []]
        ok_version = len(versions) == 1 and (versions[0] == "1.0" or (
            versions[0].startswith("1.0.") and versions[0][4:].isdigit()))
        if not ok_version:
            got = ", ".join(versions)
            return self.rpc(rid, error=a2a_error(
                -32009, f"A2A version '{got}' is not supported; this agent speaks 1.0",
                {"requestedVersion": got, "supportedVersions": "1.0"}))
        if method not in METHODS:
            return self.rpc(rid, error={"code": -32601, "message": "Method not found"})
        if not isinstance(params, dict):
            return self.rpc(rid, error={"code": -32602, "message": "Invalid parameters: params must be an object"})
        if method == "murmur.WatchSession":
            return self.watch(rid)
        if method == "murmur.StopSession":
            result = {"session_id": self.session.session_id, "canceled": self.session.cancel_every_live(),
                      "residue": []}
            return self.rpc(rid, result=result, extensions=[DOOR_EXT])
        if method == "CancelTask":
            if not isinstance(params.get("id"), str):
                return self.rpc(rid, error={"code": -32602, "message": "Invalid params: CancelTask requires an id"})
            result, error = self.session.cancel(params["id"])
            return self.rpc(rid, result=result, error=error)
        if method == "GetTask":
            with self.session.cond:
                task = self.session.tasks.get(params.get("id"))
                task = dict(task) if task else None
            if task is None:
                return self.rpc(rid, error=a2a_error(-32001, "Task not found", {"taskId": str(params.get("id"))}))
            return self.rpc(rid, result=task)
        parts = ((params.get("message") or {}).get("parts")) or []
        text = "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))
        return self.rpc(rid, result={"task": self.session.start(text)})

    def rpc(self, rid, result=None, error=None, extensions=()):
        body = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            body["error"] = error
            extensions = ()
        else:
            body["result"] = result
        self.answer(200, body, extensions)

    def watch(self, rid):
        """murmur.WatchSession: ack, replay after Last-Event-ID, live events, capsule-closed."""
        try:
            after = int(self.headers.get("Last-Event-ID") or 0)
        except ValueError:
            after = 0
        head = ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                f"connection: keep-alive\r\nA2A-Extensions: {DOOR_EXT}, {STREAM_EXT}\r\n\r\n")
        rid_json = json.dumps(rid)

        def event(eid, result):
            line = f"id: {eid}\n" if eid is not None else ""
            return f'{line}data: {{"jsonrpc":"2.0","id":{rid_json},"result":{result}}}\n\n'.encode()

        self.close_connection = True
        try:
            self.wfile.write(head.encode())
            ack = carrier({"frame": "connection-ack", "role": "observer", "conversationMode": "stateless"})
            self.wfile.write(event(None, json.dumps(ack)))
            self.wfile.flush()
            sent = after
            while True:
                with self.session.cond:
                    if len(self.session.events) <= sent and not self.session.closed:
                        self.session.cond.wait(HEARTBEAT_SECS)
                    fresh = [e for e in self.session.events if e[0] > sent]
                    closed = self.session.closed
                for eid, result in fresh:
                    self.wfile.write(event(eid, result))
                    sent = eid
                if closed:
                    self.wfile.write(event(None, json.dumps(carrier({"frame": "capsule-closed"}))))
                    self.wfile.flush()
                    return
                if not fresh:
                    self.wfile.write(b":heartbeat\n\n")
                self.wfile.flush()
        except OSError:
            return


def private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def write_private(path, data):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    ready, opts = args[0], dict(zip(args[1::2], args[2::2]))
    settings = [s for s in opts.get("--settings", "").split(",") if s]
    secret_names = [s for s in opts.get("--secrets", "").split(",") if s]

    home = os.environ.get("MURMUR_HOME") or os.path.join(os.environ["HOME"], ".murmur")
    session_id = "ses_" + uuid7_hex()
    running = os.path.join(home, "running")
    workdir = os.getcwd()
    records_dir = os.path.join(home, "records", workdir.lstrip("/"), session_id)
    for d in (home, running, os.path.join(home, "records")):
        private_dir(d)
    os.makedirs(records_dir, mode=0o700, exist_ok=True)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Door)
    server.daemon_threads = True
    url = "127.0.0.1:%d" % server.server_address[1]
    Door.session, Door.url = Session(session_id), url
    record_path = os.path.join(running, session_id + ".json")
    control_path = os.path.join(running, session_id + ".control")
    if settings or secret_names:
        Door.control = Control(secrets.token_urlsafe(32), settings, secret_names)
        write_private(control_path, Door.control.token.encode())
    pid = os.getpid()
    record = {"session_id": session_id, "url": url, "pid": pid, "process_start": start_token(pid),
              "capsule_name": "interop-door", "capsule_version": "0.8.0", "workdir": workdir,
              "records_dir": records_dir, "outlives_launcher": True, "started_at": now()}
    write_private(record_path, json.dumps(record, indent=2).encode())

    def end(*_):
        # The session's end: its event stream closes (watchers get capsule-closed), then the
        # record and the control token go, as the original's guards remove them.
        Door.session.cancel_every_live()
        Door.session.close()
        time.sleep(0.3)
        for path in (record_path, control_path):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    write_private(ready, json.dumps({"session_id": session_id, "url": url, "pid": pid}).encode())
    server.serve_forever(poll_interval=0.1)
    server.server_close()


if __name__ == "__main__":
    main()

#!/usr/bin/env node
// Talk to a mur door with the official A2A JavaScript SDK (@a2a-js/sdk 0.3.x or 1.x) and check
// every answer.
//
//     node a2a_client.mjs URL --sdk-dir DIR [--text TEXT] [--session-id SES] [--token-stdin]
//     node a2a_client.mjs URL --sdk-dir DIR --stream [--text TEXT]
//     node a2a_client.mjs URL --sdk-dir DIR --cancel PID_FILE [--text TEXT]
//
// URL is the door (`127.0.0.1:PORT` as `mur run --json` prints it, or `http://127.0.0.1:PORT/`).
// DIR holds node_modules/@a2a-js/sdk (target/a2a-js03 or target/a2a-js1, made by
// tests/sdk/setup.sh js03|js1); the SDK's major version picks the A2A generation checked: 0.x
// speaks A2A 0.3, 1.x A2A 1.0. A bearer token, when the door needs one, is read from the first
// line of stdin (`--token-stdin`) or from the environment variable MUR_A2A_TOKEN -- never argv.
//
// What it does, all through the SDK's own client code:
//   1. The SDK's default factory, `new ClientFactory().createFromUrl(url)`, fetches
//      `/.well-known/agent-card.json` and picks the transport. With 1.x that must be its native
//      1.0 `JsonRpcTransport` (the card's 1.0 interface, `client.protocolVersion` "1.0"); with
//      0.3.x its JSON-RPC transport at the card's 0.3 `url`.
//   2. `sendMessage` of one text message (blocking); the answer must be a completed task whose
//      artifact and status message carry the text sent (echo answers with the task's text).
//   3. `getTask` fetches it back (1.x: `listTasks` lists it too, both with the request the SDK
//      builds from `{}` -- which sends `"status":"UNRECOGNIZED"` -- and with a plain `{}`);
//      `getTask` of an unknown id
//      must fail with -32001 (TaskNotFound) and `cancelTask` of the finished task with -32002
//      (TaskNotCancelable), as the SDK's own error types.
//   4. With a token: the public card must declare an http bearer scheme as its security
//      requirement and the extended card, and no capsule extension; the client without
//      credentials must be refused with 401; with credentials (the SDK's per-call
//      `serviceParameters`, i.e. an `Authorization: Bearer` header) every call is accepted and
//      `client.getAgentCard()` fetches the extended card, whose capsule extension names the
//      session.
//   5. The wire, watched by wrapping `fetch`: every JSON-RPC answer is JSON-RPC 2.0 echoing its
//      request's id; every call uses the generation's method names; 1.x sends
//      `A2A-Version: 1.0` on every request and gets ProtoJSON back (no `kind`, `TASK_STATE_*`,
//      `SendMessage` answering `{"task": ...}`, error `data` an array holding a
//      `google.rpc.ErrorInfo`).
//
// With `--stream` it instead sends the text with the SDK's streaming call, `sendMessageStream`
// (0.3.x: `message/stream`; 1.x: `SendStreamingMessage` over the same native transport), and
// reports every event it yields as it comes, normalized (`task` {state, id}, `status` {state,
// final?}, `artifact` {text, append, last}), each printed at once as a line `{"event": INDEX,
// ...}`; the first chunk is also a line of its own, `{"first_chunk": TEXT, "event": INDEX}`,
// printed while the stream is still open (the test waits for it before it lets the handler end).
// On the wire each event of the stream (read from a clone of the response, alongside the SDK)
// must be JSON-RPC 2.0 echoing the request's id, for 1.x in ProtoJSON, one `StreamResponse`
// member each.
//
// With `--cancel PID_FILE` it sends the text without blocking (0.3.x `configuration.blocking:
// false`, 1.x `returnImmediately: true`) to a slow handler that writes its child's pid to
// PID_FILE, waits until `getTask` says working, cancels with `cancelTask` and reports the state
// the SDK returns, whether that pid is gone the moment the answer came, and the state `getTask`
// reads right after (the Rust test holds these to canceled).
//
// It prints one JSON line (last; with `--stream` after the event lines): {"ok": true, ...summary} or {"ok": false, "error"|"mismatch": ...}
// (exit 1). The token never appears in its output.

import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const CAPSULE_EXTENSION_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";
const ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo";
const UNKNOWN_TASK = "tsk_00000000000000000000000000000000";

class Mismatch extends Error {}

class Checks {
  passed = [];

  expect(condition, what, got) {
    if (!condition) {
      throw new Mismatch(got === undefined ? what : `${what} (got ${JSON.stringify(got)})`);
    }
    this.passed.push(what);
  }
}

// Where a 0.3 `kind` member hides in `value` (1.0 has none).
function kinds(value, at = "result") {
  if (Array.isArray(value)) return value.flatMap((v, i) => kinds(v, `${at}[${i}]`));
  if (value && typeof value === "object") {
    const here = "kind" in value ? [`${at}.kind`] : [];
    return here.concat(Object.entries(value).flatMap(([k, v]) => kinds(v, `${at}.${k}`)));
  }
  return [];
}

// Every `status.state` in `value`.
function states(value) {
  if (Array.isArray(value)) return value.flatMap(states);
  if (value && typeof value === "object") {
    const here = value.status && typeof value.status === "object" && "state" in value.status
      ? [value.status.state] : [];
    return here.concat(Object.values(value).flatMap(states));
  }
  return [];
}

// `fetch`, watched: the A2A-Version of every request; every JSON-RPC answer checked.
class Wire {
  exchanges = [];
  // The JSON-RPC request of each exchange, as sent.
  bodies = [];
  versions = new Set();
  problems = [];
  // The event streams being read alongside the SDK.
  streams = [];

  constructor(generation) {
    this.generation = generation;
  }

  install() {
    const real = globalThis.fetch;
    globalThis.fetch = async (input, init = {}) => {
      const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : {}));
      this.versions.add(headers.get("a2a-version"));
      const response = await real(input, init);
      if ((init.method ?? "GET").toUpperCase() === "POST") {
        await this.record(headers, init.body, response.clone());
      }
      return response;
    };
  }

  async record(headers, body, response) {
    let sent = {};
    try {
      sent = JSON.parse(body);
    } catch {
      // not JSON-RPC
    }
    const method = sent.method;
    this.bodies.push(sent);
    const entry = {
      method, status: response.status, authorization: headers.has("authorization"),
      version: headers.get("a2a-version"),
    };
    this.exchanges.push(entry);
    if (response.status !== 200) {
      entry.wwwAuthenticate = response.headers.get("www-authenticate");
      return;
    }
    const ctype = response.headers.get("content-type") ?? "";
    if (ctype.startsWith("text/event-stream")) {
      // Never awaited here: the SDK must get the response while the stream is still open.
      this.streams.push(this.recordStream(sent, response, entry)
        .catch((e) => this.problems.push(`${method}: reading the stream: ${e?.message}`)));
      return;
    }
    if (!ctype.startsWith("application/json")) this.problems.push(`${method}: content-type ${ctype}`);
    let answer;
    try {
      answer = JSON.parse(await response.text());
    } catch {
      this.problems.push(`${method}: the body is not JSON`);
      return;
    }
    this.checkAnswer(sent, answer, entry);
  }

  // Every event of an event stream, once it is over: JSON-RPC, the request's id, a result.
  async recordStream(sent, response, entry) {
    const text = (await response.text()).replace(/\r\n/g, "\n");
    entry.events = 0;
    for (const block of text.split("\n\n")) {
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
      if (data.length === 0) continue;
      entry.events += 1;
      let answer;
      try {
        answer = JSON.parse(data.join("\n"));
      } catch {
        this.problems.push(`${sent.method}: an event is not JSON: ${data.join("\n")}`);
        continue;
      }
      if (!("result" in answer)) this.problems.push(`${sent.method}: an event without a result: ${data}`);
      this.checkAnswer(sent, answer, entry);
    }
  }

  // Wait for the streams read alongside the SDK.
  async settled() {
    await Promise.all(this.streams);
  }

  checkAnswer(sent, answer, entry) {
    const method = sent.method;
    if (answer.jsonrpc !== "2.0") this.problems.push(`${method}: jsonrpc is ${answer.jsonrpc}`);
    if (answer.id !== sent.id) this.problems.push(`${method}: id ${answer.id} for request id ${sent.id}`);
    if (this.generation.protocol === "1.0") this.checkShapes(method, answer, entry);
  }

  checkShapes(method, answer, entry) {
    if ("error" in answer) {
      entry.error = answer.error?.code;
      const data = answer.error?.data;
      if (!(Array.isArray(data) && data.some((d) => d?.["@type"] === ERROR_INFO))) {
        this.problems.push(`${method}: error ${entry.error} data is not an array holding a `
          + `google.rpc.ErrorInfo: ${JSON.stringify(data)}`);
      }
      return;
    }
    const result = answer.result;
    this.problems.push(...kinds(result).map((k) => `${method}: 0.3 member ${k}`));
    this.problems.push(...states(result).filter((s) => !String(s).startsWith("TASK_STATE_"))
      .map((s) => `${method}: state ${s} is not TASK_STATE_*`));
    if (method === "SendMessage" && !(result && ("task" in result || "message" in result))) {
      this.problems.push(`SendMessage: the result is not {task} or {message}: ${JSON.stringify(result)}`);
    }
    const members = ["task", "message", "statusUpdate", "artifactUpdate"].filter((m) => result && m in result);
    if (method === "SendStreamingMessage" && members.length !== 1) {
      this.problems.push(`SendStreamingMessage: an event is not one StreamResponse member: ${JSON.stringify(result)}`);
    }
  }
}

function sessionOf(card) {
  const ext = (card.capabilities?.extensions ?? []).find((e) => e.uri === CAPSULE_EXTENSION_URI);
  return ext?.params?.sessionId ?? null;
}

const texts03 = (parts) => (parts ?? []).filter((p) => p.kind === "text").map((p) => p.text);
const texts1 = (parts) => (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);

// A stream's event as the summary reports it: `task`, `status`, `artifact` or `message` (the
// SDK's own name for anything else) with the fields `read[name]()` picks.
function normalized(name, read) {
  const kinds = { task: "task", "status-update": "status", statusUpdate: "status", "artifact-update": "artifact",
    artifactUpdate: "artifact", message: "message" };
  return { kind: kinds[name] ?? String(name), ...(read[name]?.() ?? {}) };
}

// What differs between the SDK's 0.3 and 1.x clients, and between the two A2A generations.
function generationOf(sdkVersion, sdk) {
  if (sdkVersion.startsWith("0.")) {
    return {
      protocol: "0.3",
      methods: ["message/send", "message/stream", "tasks/get", "tasks/cancel", "agent/getAuthenticatedExtendedCard"],
      extendedCardMethod: "agent/getAuthenticatedExtendedCard",
      completed: "completed",
      working: "working",
      message: (text, nonBlocking = false) => ({
        message: { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text }] },
        ...(nonBlocking ? { configuration: { blocking: false } } : {}),
      }),
      request: (_type, params) => params,
      isTask: (result) => result?.kind === "task",
      state: (task) => task.status?.state,
      texts: texts03,
      // One event `sendMessageStream` yields (the 0.3 wire shapes, `kind` and all).
      event: (e) => normalized(e.kind, {
        task: () => ({ state: e.status?.state, id: e.id }),
        "status-update": () => ({ state: e.status?.state, final: e.final }),
        "artifact-update": () => ({ text: texts03(e.artifact?.parts).join(""), append: e.append, last: e.lastChunk }),
        message: () => ({ text: texts03(e.parts).join("") }),
      }),
      errorCode: (e) => e?.errorResponse?.error?.code,
      checkCard(c, card, url) {
        c.expect(String(card.protocolVersion).startsWith("0.3"), "card: protocolVersion 0.3", card.protocolVersion);
        c.expect(card.preferredTransport === "JSONRPC", "card: preferredTransport JSONRPC", card.preferredTransport);
        c.expect(card.url?.replace(/\/$/, "") === url.replace(/\/$/, ""), "card: url is the door", card.url);
      },
      extendedCardDeclared: (card) => Boolean(card.supportsAuthenticatedExtendedCard),
      requiredSchemes: (card) => (card.security ?? []).flatMap((r) => Object.keys(r)),
      isBearer: (scheme) => scheme?.type === "http" && scheme?.scheme?.toLowerCase() === "bearer",
    };
  }
  return {
    protocol: "1.0",
    methods: ["SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "GetExtendedAgentCard"],
    extendedCardMethod: "GetExtendedAgentCard",
    completed: "TASK_STATE_COMPLETED",
    working: "TASK_STATE_WORKING",
    message: (text, nonBlocking = false) => sdk.SendMessageRequest.fromJSON({
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] },
      ...(nonBlocking ? { configuration: { returnImmediately: true } } : {}),
    }),
    // The SDK's request messages, every field at its default (its toJSON sends a missing enum as
    // "UNRECOGNIZED").
    request: (type, params) => sdk[type].fromJSON(params),
    isTask: (result) => result !== undefined && "status" in result && !("messageId" in result),
    state: (task) => sdk.taskStateToJSON(task.status?.state),
    texts: texts1,
    // One `StreamResponse` `sendMessageStream` yields (a `$case` oneof).
    event: ({ payload }) => normalized(payload?.$case, {
      task: () => ({ state: sdk.taskStateToJSON(payload.value.status?.state), id: payload.value.id }),
      statusUpdate: () => ({ state: sdk.taskStateToJSON(payload.value.status?.state) }),
      artifactUpdate: () => ({ text: texts1(payload.value.artifact?.parts).join(""), append: payload.value.append,
        last: payload.value.lastChunk }),
      message: () => ({ text: texts1(payload.value.parts).join("") }),
    }),
    errorCode: (e) => e?.envelopeCode,
    checkCard(c, card, url, client) {
      const jsonrpc = (card.supportedInterfaces ?? []).filter((i) => i.protocolBinding === "JSONRPC");
      c.expect(jsonrpc[0]?.protocolVersion === "1.0", "card: the first JSONRPC interface is 1.0",
        card.supportedInterfaces);
      c.expect(jsonrpc[0].url.replace(/\/$/, "") === url.replace(/\/$/, ""), "card: the 1.0 interface is the door",
        jsonrpc[0].url);
      const transport = client.transport.constructor.name;
      c.expect(transport === "JsonRpcTransport" && client.protocolVersion === "1.0",
        "the native 1.0 JsonRpcTransport, not the legacy one", [transport, client.protocolVersion]);
    },
    extendedCardDeclared: (card) => Boolean(card.capabilities?.extendedAgentCard),
    requiredSchemes: (card) => (card.securityRequirements ?? []).flatMap((r) => Object.keys(r.schemes ?? {})),
    // The card as sent (ProtoJSON `httpAuthSecurityScheme`), or as the SDK's resolver keeps a
    // card it reads as protobuf-shaped (a `$case` oneof).
    isBearer: (scheme) => {
      const http = scheme?.httpAuthSecurityScheme
        ?? (scheme?.scheme?.$case === "httpAuthSecurityScheme" ? scheme.scheme.value : undefined);
      return http?.scheme?.toLowerCase() === "bearer";
    },
  };
}

function checkTask(c, g, task, text, label) {
  c.expect(g.isTask(task), `${label}: the result is a task`, task);
  c.expect(g.state(task) === g.completed, `${label}: the task completed`, g.state(task));
  c.expect(task.id && task.contextId, `${label}: the task has an id and a contextId`);
  const artifactText = (task.artifacts ?? []).flatMap((a) => g.texts(a.parts));
  c.expect(JSON.stringify(artifactText) === JSON.stringify([text]), `${label}: the artifact carries the answer`,
    artifactText);
  const statusText = g.texts(task.status?.message?.parts);
  c.expect(JSON.stringify(statusText) === JSON.stringify([text]), `${label}: the status message carries the answer`,
    statusText);
  const history = (task.history ?? []).flatMap((m) => g.texts(m.parts));
  c.expect(history.includes(text), `${label}: the history holds the message sent`, history);
}

async function expectCode(c, g, call, code, what) {
  let failed;
  try {
    await call();
  } catch (e) {
    failed = e;
  }
  c.expect(failed !== undefined, `${what}: refused`);
  c.expect(g.errorCode(failed) === code, `${what}: ${code} (${failed?.constructor?.name})`,
    `${failed?.constructor?.name}: ${failed?.message}`);
}

// The public card of an authenticated door, and the client refused without credentials.
async function checkAuthenticatedDoor(c, g, card, client, text, summary) {
  c.expect(g.extendedCardDeclared(card), "public card: the extended card is declared");
  c.expect(sessionOf(card) === null, "public card: no capsule extension", sessionOf(card));
  const required = g.requiredSchemes(card);
  c.expect(required.length > 0, "public card: a security requirement", card);
  summary.security_scheme = required[0];
  c.expect(g.isBearer(card.securitySchemes?.[required[0]]), "public card: the required scheme is http bearer",
    card.securitySchemes);
  let refused;
  try {
    await client.sendMessage(g.message(text));
  } catch (e) {
    refused = e;
  }
  c.expect(refused !== undefined, "no credentials: the message is refused");
  // The 401 carries a JSON-RPC error body (the door's unauthenticated code, -32030), which the
  // SDKs report as that error rather than as the bare HTTP status: 0.3 with its code, 1.x by
  // its message.
  const unauthenticated = /Status: 401\b|Code: -32030\b|^unauthenticated: /;
  c.expect(unauthenticated.test(refused.message), "no credentials: HTTP 401", refused.message);
}

function checkWire(c, g, wire, token) {
  const versions = [...wire.versions].map(String).sort();
  if (g.protocol === "1.0") {
    c.expect(versions.length === 1 && versions[0] === "1.0", "wire: every request carried A2A-Version: 1.0",
      versions);
  }
  const methods = [...new Set(wire.exchanges.map((x) => x.method))];
  c.expect(methods.every((m) => g.methods.includes(m)), `wire: only ${g.protocol} method names`, methods);
  c.expect(wire.problems.length === 0, "wire: JSON-RPC answers echoing each request id", wire.problems);
  if (token !== null) {
    const accepted = wire.exchanges.filter((x) => x.status === 200);
    c.expect(accepted.length > 0 && accepted.every((x) => x.authorization),
      "every accepted request carried the Authorization header", accepted);
    const refused = wire.exchanges.filter((x) => x.status === 401);
    c.expect(refused.length > 0 && refused.every((x) => (x.wwwAuthenticate ?? "").startsWith("Bearer")),
      "the 401 names the Bearer scheme", refused);
  }
}

// The SDK in `sdkDir`, the wire watched, and (1.) its default factory's client for the door at
// `url`: the card, and the transport it picks.
async function open(url, sdkDir) {
  const req = createRequire(path.resolve(sdkDir, "package.json"));
  const clientModule = req.resolve("@a2a-js/sdk/client");
  const root = clientModule.slice(0, clientModule.lastIndexOf(`${path.sep}dist${path.sep}`));
  const sdkVersion = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).version;
  const { ClientFactory } = req("@a2a-js/sdk/client");
  const g = generationOf(sdkVersion, sdkVersion.startsWith("0.") ? null : req("@a2a-js/sdk"));
  const c = new Checks();
  const wire = new Wire(g);
  wire.install();
  const summary = { sdk: `@a2a-js/sdk ${sdkVersion}`, url, protocol: g.protocol };

  const client = await new ClientFactory().createFromUrl(url);
  const card = client.agentCard;
  summary.card = { name: card.name, version: card.version, url: card.url, protocolVersion: card.protocolVersion,
    supportedInterfaces: card.supportedInterfaces };
  summary.transport = client.transport.constructor.name;
  g.checkCard(c, card, url, client);
  c.expect((card.skills ?? []).length >= 1, "card: at least one skill");
  return { g, c, wire, client, card, summary };
}

// The last checks, and what the summary says of the wire.
async function finish(c, g, wire, token, summary) {
  await wire.settled();
  checkWire(c, g, wire, token);
  summary.a2a_versions = [...wire.versions].map(String).sort();
  summary.rpc_calls = wire.exchanges.map((x) => `${x.method}:${x.status}`);
  summary.stream_events = wire.exchanges.filter((x) => x.events !== undefined).map((x) => x.events);
  summary.checks = c.passed.length;
  return summary;
}

async function run({ url, sdkDir, text, token, wantSession }) {
  const { g, c, wire, client, card, summary } = await open(url, sdkDir);
  summary.authenticated = token !== null;
  let options;
  if (token !== null) {
    await checkAuthenticatedDoor(c, g, card, client, text, summary);
    options = { serviceParameters: { Authorization: `Bearer ${token}` } };
  } else {
    c.expect(!g.extendedCardDeclared(card), "public door: no extended card declared");
    c.expect(wantSession ? sessionOf(card) === wantSession : sessionOf(card) !== null,
      "public card: the capsule extension names the session", sessionOf(card));
    summary.session_id = sessionOf(card);
  }

  // 2. The task, blocking; 3. read back, listed, and the A2A error codes.
  const task = await client.sendMessage(g.message(text), options);
  checkTask(c, g, task, text, "sendMessage");
  summary.task = { id: task.id, contextId: task.contextId, state: g.state(task),
    answer: g.texts(task.artifacts[0].parts)[0] };
  const again = await client.getTask(g.request("GetTaskRequest", { id: task.id }), options);
  checkTask(c, g, again, text, "getTask");
  c.expect(again.id === task.id && again.contextId === task.contextId, "getTask: the same task",
    [again.id, again.contextId]);
  if (g.protocol === "1.0") {
    const listed = await client.listTasks(g.request("ListTasksRequest", {}), options);
    c.expect((listed.tasks ?? []).some((t) => t.id === task.id), "listTasks: the task is listed",
      (listed.tasks ?? []).map((t) => t.id));
    // A plain `{}`, as a caller writes it: the SDK sends `"status":"UNRECOGNIZED"` for the
    // missing enum, which the proto3 JSON mapping makes "no filter".
    const sent = wire.exchanges.length;
    let plain;
    try {
      plain = await client.listTasks({}, options);
    } catch (e) {
      plain = { error: `${e?.constructor?.name}: ${e?.message}` };
    }
    const status = wire.bodies.slice(sent).map((b) => b?.params?.status);
    summary.list_plain = { status, error: plain.error ?? null,
      listed: (plain.tasks ?? []).some((t) => t.id === task.id) };
  }
  const unknown = g.request("GetTaskRequest", { id: UNKNOWN_TASK });
  await expectCode(c, g, () => client.getTask(unknown, options), -32001, "getTask unknown");
  const cancel = g.request("CancelTaskRequest", { id: task.id });
  await expectCode(c, g, () => client.cancelTask(cancel, options), -32002, "cancelTask finished");

  // 4. The extended card.
  if (token !== null) {
    const extended = await client.getAgentCard(options);
    const sid = sessionOf(extended);
    c.expect(wantSession ? sid === wantSession : sid !== null, "extended card: the capsule extension names the session",
      sid);
    c.expect(wire.exchanges.some((x) => x.method === g.extendedCardMethod && x.status === 200),
      `extended card: fetched by ${g.extendedCardMethod}`, wire.exchanges);
    summary.session_id = sid;
    summary.extended_card = true;
  }

  return finish(c, g, wire, token, summary);
}

// `--stream`: the text through `sendMessageStream`, every event reported as it came.
async function stream({ url, sdkDir, text }) {
  const { g, c, wire, client, card, summary } = await open(url, sdkDir);
  summary.mode = "stream";
  c.expect(card.capabilities?.streaming === true, "card: capabilities.streaming", card.capabilities);
  const events = [];
  for await (const event of client.sendMessageStream(g.message(text))) {
    const seen = g.event(event);
    const first = seen.kind === "artifact" && seen.text && !events.some((e) => e.kind === "artifact" && e.text);
    events.push(seen);
    console.log(JSON.stringify({ event: events.length - 1, ...seen }));
    if (first) console.log(JSON.stringify({ first_chunk: seen.text, event: events.length - 1 }));
  }
  summary.events = events;
  return finish(c, g, wire, null, summary);
}

// The pid the slow handler wrote to `pidFile` (its background `sleep`), once it is there.
async function handlerPid(pidFile, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const text = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, "utf8").trim() : "";
    if (/^\d+$/.test(text)) return Number(text);
    if (Date.now() > deadline) throw new Mismatch(`the handler wrote no pid to ${pidFile} within ${seconds} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// null when process `pid` is gone (reaped); otherwise its /proc state (a zombie counts as left).
function processLeft(pid) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if (e.code === "ESRCH") return null;
  }
  try {
    return `state ${fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().split(" ")[0]}`;
  } catch {
    return "alive";
  }
}

// `--cancel`: a running task canceled through `cancelTask`.
async function cancel({ url, sdkDir, text, cancelPidFile }) {
  const { g, c, wire, client, summary } = await open(url, sdkDir);
  summary.mode = "cancel";
  const task = await client.sendMessage(g.message(text, true));
  c.expect(g.isTask(task), "sendMessage, not blocking: a task", task);
  const pid = await handlerPid(cancelPidFile);
  const state = async () => g.state(await client.getTask(g.request("GetTaskRequest", { id: task.id })));
  const deadline = Date.now() + 30000;
  let running = await state();
  while (running !== g.working && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    running = await state();
  }
  const canceled = await client.cancelTask(g.request("CancelTaskRequest", { id: task.id }));
  const left = processLeft(pid);
  c.expect(canceled?.id === task.id, "cancelTask: the task back", canceled);
  summary.cancel = { id: task.id, sent: g.state(task), running, returned: g.state(canceled), handler_left: left,
    after: await state() };
  return finish(c, g, wire, null, summary);
}

function parseArgs(argv) {
  const args = { text: "hello from @a2a-js/sdk", wantSession: null, tokenStdin: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--sdk-dir") args.sdkDir = argv[++i];
    else if (arg === "--text") args.text = argv[++i];
    else if (arg === "--session-id") args.wantSession = argv[++i];
    else if (arg === "--token-stdin") args.tokenStdin = true;
    else if (arg === "--stream") args.stream = true;
    else if (arg === "--cancel") args.cancelPidFile = argv[++i];
    else if (!arg.startsWith("--") && args.url === undefined) args.url = arg;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (!args.url || !args.sdkDir) throw new Error("usage: a2a_client.mjs URL --sdk-dir DIR [--text TEXT] "
    + "[--session-id SES] [--token-stdin] [--stream | --cancel PID_FILE]");
  args.url = `${args.url.includes("://") ? args.url : `http://${args.url}`}`.replace(/\/*$/, "/");
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let token = null;
  if (args.tokenStdin) token = fs.readFileSync(0, "utf8").split("\n")[0].trim();
  else if (process.env.MUR_A2A_TOKEN) token = process.env.MUR_A2A_TOKEN.trim();
  if (token === "") {
    console.log(JSON.stringify({ ok: false, error: "an empty token" }));
    return 1;
  }
  try {
    const summary = await (args.cancelPidFile ? cancel : args.stream ? stream : run)({ ...args, token });
    console.log(JSON.stringify({ ...summary, ok: true }));
    return 0;
  } catch (e) {
    if (e instanceof Mismatch) {
      console.log(JSON.stringify({ ok: false, mismatch: e.message }));
    } else {
      // an SDK error is a failed interop, reported, never a crash
      console.error(e?.stack ?? e);
      console.log(JSON.stringify({ ok: false, error: `${e?.constructor?.name}: ${e?.message}` }));
    }
    return 1;
  }
}

process.exitCode = await main();

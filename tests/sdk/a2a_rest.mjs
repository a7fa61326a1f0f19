// Talk to a mur door with the official @a2a-js/sdk 1.x client forced onto its HTTP+JSON (REST)
// transport, and check it.
//
//   node a2a_rest.mjs URL --sdk-dir DIR [--legacy]
//
// URL is the door (`127.0.0.1:PORT`); DIR holds the SDK (tests/sdk/setup.sh js1). The door must
// run the "asker" handler of tests/it/rest.rs: it answers with the text it got, except that a
// first turn whose text is `ask` asks `name?` (input required), `slow` is answered after a
// second, and `parts` with the message it got (`received.json`) and a note (`note.txt`); its
// manifest must allow push notifications to 127.0.0.1.
//
// The client comes from the SDK's own `ClientFactory` given only its `RestTransportFactory`: it
// must build the native 1.0 `RestTransport` — or, with `--legacy` (the factory's `legacyCompat`
// on, and a card whose only HTTP+JSON interface is the 0.3 one), its v0.3 transport at the `/v1`
// paths. Through it: send (completed, the text echoed), get, list (1.0 only), an unknown task's
// get and a finished task's cancel refused, a streamed send (the task first, the answer
// assembled, completed last), a multi-turn task, a task waiting for input canceled, a
// resubscription to a task still working (sent without waiting) that sees it complete, a file
// and a data part sent and got back, and push notifications to a receiver of the driver's own:
// a config given with a send, and one created, read, listed and deleted through the SDK for a
// task waiting for input, each receiving every update of its task with its token (1.0:
// `StreamResponse`s; 0.3: the task). On the wire (the global fetch watched): no request to `/`, every call at its generation's paths.
//
// It prints one JSON line: `{"ok": true, ...}` or `{"ok": false, "problems": [...]}` (exit 1).

import { randomUUID } from "node:crypto";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

const UNKNOWN_TASK = "tsk_0190f0f0f0f07000800000000000abcd";

async function run(url, sdkDir, legacy) {
  const req = createRequire(path.resolve(sdkDir, "package.json"));
  const { ClientFactory, ClientFactoryOptions, RestTransportFactory, DefaultAgentCardResolver } =
    req("@a2a-js/sdk/client");
  const sdk = req("@a2a-js/sdk");
  const problems = [];
  let checked = 0;
  const expect = (ok, what, got) => (ok ? checked++ : problems.push(`${what}: ${JSON.stringify(got)}`));

  const wire = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const request = input instanceof Request ? input : undefined;
    const target = new URL(String(request?.url ?? input));
    const headers = new Headers(init?.headers ?? request?.headers);
    wire.push({ method: init?.method ?? request?.method ?? "GET", path: target.pathname,
      version: headers.get("a2a-version") });
    return realFetch(input, init);
  };

  const card = await new DefaultAgentCardResolver().resolve(url);
  const rest = (card.supportedInterfaces ?? []).filter((i) => i.protocolBinding === "HTTP+JSON");
  expect(JSON.stringify(rest.map((i) => i.protocolVersion)) === '["1.0","0.3"]', "card: HTTP+JSON 1.0 and 0.3", rest);
  if (legacy) {
    card.supportedInterfaces = card.supportedInterfaces.filter(
      (i) => i.protocolBinding !== "HTTP+JSON" || i.protocolVersion === "0.3");
  }
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new RestTransportFactory({ legacyCompat: { enabled: legacy } })],
    preferredTransports: ["HTTP+JSON"],
  }));
  const client = await factory.createFromAgentCard(card);
  const transport = client.transport.constructor.name;
  // The bundle names its classes with a leading `_`.
  expect((legacy ? /^_?LegacyRestTransport$/ : /^_?RestTransport$/).test(transport),
    "transport: the SDK's REST one of the generation", transport);

  const texts = (parts) => (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
  const state = (task) => sdk.taskStateToJSON(task.status?.state);
  const message = (text, taskId) => sdk.SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...(taskId ? { taskId } : {}) },
  });
  const send = async (text, taskId) => {
    const answer = await client.sendMessage(message(text, taskId));
    if (!answer || !("status" in answer)) throw new Error(`send: not a task: ${JSON.stringify(answer)}`);
    return answer;
  };
  const refused = async (what, call) => {
    try {
      await call();
      expect(false, what, "succeeded");
    } catch (e) {
      expect(true, what, String(e));
    }
  };

  const task = await send("hello");
  expect(state(task) === "TASK_STATE_COMPLETED", "send: completed", state(task));
  const answer = (task.artifacts ?? []).flatMap((a) => texts(a.parts));
  expect(JSON.stringify(answer) === '["hello"]', "send: the answer", answer);
  const got = await client.getTask(sdk.GetTaskRequest.fromJSON({ id: task.id }));
  expect(got.id === task.id && state(got) === "TASK_STATE_COMPLETED", "get: the task", [got.id, state(got)]);
  if (!legacy) {
    const listed = await client.listTasks(sdk.ListTasksRequest.fromJSON({}));
    expect(listed.tasks.some((t) => t.id === task.id), "list: the task", listed.tasks.length);
  }
  await refused("get unknown: refused", () => client.getTask(sdk.GetTaskRequest.fromJSON({ id: UNKNOWN_TASK })));
  await refused("cancel finished: refused", () => client.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: task.id })));

  const events = [];
  for await (const event of client.sendMessageStream(message("streamed"))) events.push(event);
  const cases = events.map((e) => e.payload?.$case);
  expect(cases[0] === "task", "stream: the task first", cases);
  const streamed = events.filter((e) => e.payload?.$case === "artifactUpdate")
    .flatMap((e) => texts(e.payload.value.artifact?.parts)).join("");
  expect(streamed === "streamed", "stream: the answer assembled", streamed);
  const last = events.at(-1)?.payload;
  expect(last?.$case === "statusUpdate" && sdk.taskStateToJSON(last.value.status?.state) === "TASK_STATE_COMPLETED",
    "stream: completed last", cases);

  const asked = await send("ask");
  expect(state(asked) === "TASK_STATE_INPUT_REQUIRED", "multi-turn: input required", state(asked));
  const answered = await send("Ada", asked.id);
  expect(answered.id === asked.id && state(answered) === "TASK_STATE_COMPLETED", "multi-turn: completed",
    [answered.id, state(answered)]);
  const second = (answered.artifacts ?? []).flatMap((a) => texts(a.parts));
  expect(JSON.stringify(second) === '["Ada"]', "multi-turn: the second turn's answer", second);
  const waiting = await send("ask");
  const canceled = await client.cancelTask(sdk.CancelTaskRequest.fromJSON({ id: waiting.id }));
  expect(state(canceled) === "TASK_STATE_CANCELED", "cancel: canceled", state(canceled));

  // Resubscribe: a task still working, sent without waiting, followed to its end.
  const slow = sdk.SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "slow" }] },
    configuration: { returnImmediately: true },
  });
  const working = await client.sendMessage(slow);
  const followed = [];
  for await (const event of client.resubscribeTask(sdk.SubscribeToTaskRequest.fromJSON({ id: working.id }))) {
    followed.push(event);
  }
  const followedCases = followed.map((e) => e.payload?.$case);
  expect(followedCases[0] === "task", "resubscribe: the task first", followedCases);
  const followedText = followed.filter((e) => e.payload?.$case === "artifactUpdate")
    .flatMap((e) => texts(e.payload.value.artifact?.parts)).join("");
  expect(followedText === "slow", "resubscribe: the answer", followedText);
  const end = followed.at(-1)?.payload;
  expect(end?.$case === "statusUpdate" && sdk.taskStateToJSON(end.value.status?.state) === "TASK_STATE_COMPLETED",
    "resubscribe: completed last", followedCases);

  // Parts: a file and a data part in; the message the handler got and a note back. The SDK's
  // 0.3 proto conversion carries no file name either way (it never sets or reads the proto
  // FilePart's `name`), so through it a file arrives and returns nameless.
  const withParts = await client.sendMessage(sdk.SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "parts" },
      { raw: "AAFiaW4=", filename: "bin.dat", mediaType: "application/octet-stream" }, { data: { k: [1, 2] } }] },
  }));
  const back = (withParts.artifacts ?? []).flatMap((a) => a.parts ?? []);
  const received = back.find((p) => p.content?.$case === "data")?.content.value;
  const sentParts = received?.parts ?? [];
  const named = (p, name) => p.filename === (legacy ? undefined : name);
  expect(sentParts.some((p) => named(p, "bin.dat") && p.raw === "AAFiaW4=") &&
    sentParts.some((p) => JSON.stringify(p.data) === '{"k":[1,2]}'),
  "parts: the file and the data as the handler got them", sentParts);
  const note = back.find((p) => p.content?.$case === "raw");
  expect(note?.filename === (legacy ? "" : "note.txt") && Buffer.from(note.content.value).toString() === "got parts\n",
    "parts: the handler's file", note && [note.filename, Buffer.from(note.content.value).toString()]);

  await push(client, sdk, message, send, expect);

  const a2a = wire.filter((x) => !x.path.startsWith("/.well-known/"));
  expect(a2a.length > 0 && a2a.every((x) => x.path !== "/"), "wire: no JSON-RPC", a2a.slice(0, 3));
  expect(a2a.every((x) => x.path.startsWith("/v1/") === legacy), "wire: the generation's paths",
    [...new Set(a2a.map((x) => x.path))]);
  return { ok: problems.length === 0, transport, checked, requests: a2a.length, ...(problems.length ? { problems } : {}) };
}

// A webhook receiver on 127.0.0.1: every POST, as { token, body }, answered 200.
async function receiver() {
  const posts = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      posts.push({ token: request.headers["x-a2a-notification-token"], body: JSON.parse(Buffer.concat(chunks)) });
      response.end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/hook`, posts, server };
}

// Each update `posts` delivered for `taskId`: its token, its state, its answer's text, whether it
// is the whole task (1.0 posts a StreamResponse, an artifact update one chunk; 0.3 the task).
function updates(posts, taskId) {
  return posts.flatMap(({ token, body }) => {
    const part = body.statusUpdate ?? body.artifactUpdate ?? body.task;
    const update = part ?? body;
    const artifacts = update.artifact ? [update.artifact] : (update.artifacts ?? []);
    const text = artifacts.flatMap((a) => a.parts ?? []).filter((p) => "text" in p).map((p) => p.text).join("");
    const owner = update.taskId ?? update.id;
    return owner === taskId ? [{ token, state: update.status?.state, text, whole: !part || "task" in body }] : [];
  });
}

async function ended(posts, taskId) {
  for (let i = 0; i < 300; i++) {
    if (updates(posts, taskId).some((u) => u.state === "TASK_STATE_COMPLETED" || u.state === "completed")) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return updates(posts, taskId);
}

// Every update of one task reached the receiver: each with the config's token, working, the
// answer (1.0: the chunks assembled; 0.3: as the last task shows it), and completed last.
function checkPushed(expect, got, token, answer, label) {
  const states = got.map((u) => u.state).filter(Boolean);
  const chunks = got.filter((u) => !u.whole).map((u) => u.text).join("");
  const tasks = got.filter((u) => u.whole).map((u) => u.text);
  const text = tasks.length && !chunks ? tasks.at(-1) : chunks;
  expect(got.length > 0 && got.every((u) => u.token === token), `${label}: the token`, got);
  expect(states.some((s) => s === "TASK_STATE_WORKING" || s === "working"), `${label}: working`, states);
  expect(text === answer, `${label}: the answer`, text);
  expect(["TASK_STATE_COMPLETED", "completed"].includes(states.at(-1)), `${label}: completed last`, states);
}

// Webhooks: a config given with a send, and one created for a task waiting for input, read,
// listed and deleted; each receives every update of its task.
async function push(client, sdk, message, send, expect) {
  const hook = await receiver();
  const request = message("pushed");
  request.configuration = sdk.SendMessageConfiguration.fromJSON({
    taskPushNotificationConfig: { url: hook.url, token: "given-with-the-send" },
  });
  const task = await client.sendMessage(request);
  checkPushed(expect, await ended(hook.posts, task.id), "given-with-the-send", "pushed", "push with a send");

  const waiting = await send("ask");
  const made = await client.createTaskPushNotificationConfig(sdk.TaskPushNotificationConfig.fromJSON({
    taskId: waiting.id, id: "hook-1", url: hook.url, token: "set-for-the-task",
  }));
  expect(made.id === "hook-1" && made.url === hook.url, "push: the config set", [made.id, made.url]);
  const got = await client.getTaskPushNotificationConfig(
    sdk.GetTaskPushNotificationConfigRequest.fromJSON({ taskId: waiting.id, id: "hook-1" }));
  expect(got.url === hook.url, "push: the config read", got.url);
  const listed = await client.listTaskPushNotificationConfig(
    sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: waiting.id }));
  const ids = (listed.configs ?? []).map((c) => c.id);
  expect(JSON.stringify(ids) === '["hook-1"]', "push: the config listed", ids);
  await send("Di", waiting.id);
  checkPushed(expect, await ended(hook.posts, waiting.id), "set-for-the-task", "Di", "push to a config set");
  await client.deleteTaskPushNotificationConfig(
    sdk.DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: waiting.id, id: "hook-1" }));
  const after = await client.listTaskPushNotificationConfig(
    sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: waiting.id }));
  expect((after.configs ?? []).length === 0, "push: the config deleted", after.configs);
  const others = hook.posts.filter(({ body }) => {
    const text = JSON.stringify(body);
    return !text.includes(task.id) && !text.includes(waiting.id);
  });
  expect(others.length === 0, "push: no update of another task", others.length);
  hook.server.close();
}

const args = process.argv.slice(2);
const [where] = args.filter((a, i) => !a.startsWith("--") && args[i - 1] !== "--sdk-dir");
const door = where.startsWith("http") ? where : `http://${where}/`;
const sdkDir = args[args.indexOf("--sdk-dir") + 1];
let result;
try {
  result = await run(door, sdkDir, args.includes("--legacy"));
} catch (e) {
  result = { ok: false, problems: [`${e?.name}: ${e?.message}`] };
}
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);

// Talk to a mur door with the official @a2a-js/sdk 1.x client forced onto its HTTP+JSON (REST)
// transport, and check it.
//
//   node a2a_rest.mjs URL --sdk-dir DIR [--legacy]
//
// URL is the door (`127.0.0.1:PORT`); DIR holds the SDK (tests/sdk/setup.sh js1). The door must
// run the "asker" handler of tests/it/rest.rs: it answers with the text it got, except that a
// first turn whose text is `ask` asks `name?` (input required).
//
// The client comes from the SDK's own `ClientFactory` given only its `RestTransportFactory`: it
// must build the native 1.0 `RestTransport` — or, with `--legacy` (the factory's `legacyCompat`
// on, and a card whose only HTTP+JSON interface is the 0.3 one), its v0.3 transport at the `/v1`
// paths. Through it: send (completed, the text echoed), get, list (1.0 only), an unknown task's
// get and a finished task's cancel refused, a streamed send (the task first, the answer
// assembled, completed last), a multi-turn task, and a task waiting for input canceled. On the
// wire (the global fetch watched): no request to `/`, every call at its generation's paths.
//
// It prints one JSON line: `{"ok": true, ...}` or `{"ok": false, "problems": [...]}` (exit 1).

import { randomUUID } from "node:crypto";
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

  const a2a = wire.filter((x) => !x.path.startsWith("/.well-known/"));
  expect(a2a.length > 0 && a2a.every((x) => x.path !== "/"), "wire: no JSON-RPC", a2a.slice(0, 3));
  expect(a2a.every((x) => x.path.startsWith("/v1/") === legacy), "wire: the generation's paths",
    [...new Set(a2a.map((x) => x.path))]);
  return { ok: problems.length === 0, transport, checked, requests: a2a.length, ...(problems.length ? { problems } : {}) };
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

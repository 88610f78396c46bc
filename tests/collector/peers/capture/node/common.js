// Shared by the Node capture scripts: fixed content (same as peerlib.py) and OTel wiring from the standard
// variables. Each script passes its own `require`, so packages resolve from its own node project.
"use strict";

const SYSTEM_PROMPT = "You are Prism, a careful travel assistant for Acme Rail. " +
  "Answer in one short paragraph and never invent timetables.";
const HISTORY = [
  ["user", "I want to go from Lyon to Turin next Friday."],
  ["assistant", "Sure. Do you prefer to travel in the morning or in the afternoon?"],
  ["user", "Morning, please. And what will the weather be in Turin?"],
];
const TOOLS = [
  {
    name: "get_timetable", description: "Train departures between two stations on a date.",
    parameters: {
      type: "object", properties: {
        origin: { type: "string" }, destination: { type: "string" },
        date: { type: "string", description: "ISO date" },
      }, required: ["origin", "destination", "date"],
    },
  },
  {
    name: "get_weather", description: "Weather forecast for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];
// > 1 KiB so the fake provider's simulated prompt cache applies; identical to peerlib.LONG_SYSTEM_PROMPT.
const LONG_SYSTEM_PROMPT = SYSTEM_PROMPT + "\n\nHouse rules:\n" + Array.from({ length: 15 }, (_, k) => k + 1).map((i) =>
  `${i}. Rule ${i}: quote prices in euros, name the station, give the platform when known, ` +
  "and say when a connection is shorter than ten minutes.").join("\n");
const TOOL_RESULT = JSON.stringify({ departures: ["07:12", "08:40"], platform: "B" });
const OPENAI_MODEL = "gpt-4o-mini";
const MAX_TOKENS = 256;

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run through run_captures.py)`);
  return value;
}

function telemetry(req, serviceName) {
  const { NodeTracerProvider } = req("@opentelemetry/sdk-trace-node");
  const { BatchSpanProcessor } = req("@opentelemetry/sdk-trace-base");
  const { resourceFromAttributes } = req("@opentelemetry/resources");
  const protocol = process.env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf";
  const pkg = { "grpc": "@opentelemetry/exporter-trace-otlp-grpc", "http/protobuf": "@opentelemetry/exporter-trace-otlp-proto",
                "http/json": "@opentelemetry/exporter-trace-otlp-http" }[protocol];
  const { OTLPTraceExporter } = req(pkg);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  const api = req("@opentelemetry/api");
  return { provider, api, tracer: provider.getTracer("capture.app") };
}

async function fetchFixture() {
  // Node's fetch (undici) is not instrumented here: this is only the app's own work, no span.
  const response = await fetch(env("FIXTURE_URL"));
  return response.json();
}

function openaiMessages() {
  return [{ role: "system", content: SYSTEM_PROMPT }, ...HISTORY.map(([role, content]) => ({ role, content }))];
}

function openaiTools() {
  return TOOLS.map((t) => ({ type: "function", function: t }));
}

function responsesTools() {
  return TOOLS.map((t) => ({ type: "function", ...t }));
}

// Same calls as peerlib.py, on the official openai client (v6).
async function chat(client, { stream = false } = {}) {
  const body = { model: OPENAI_MODEL, messages: openaiMessages(), tools: openaiTools(), temperature: 0.2,
                 max_tokens: MAX_TOKENS };
  if (!stream) {
    const r = await client.chat.completions.create(body);
    return r.choices[0].message.content;
  }
  let text = "";
  const s = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of s) {
    if (chunk.choices.length && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
  }
  return text;
}

async function chatToolLoop(client, runTool) {
  let messages = openaiMessages();
  const first = await client.chat.completions.create({
    model: OPENAI_MODEL, messages, tools: openaiTools(), max_tokens: MAX_TOKENS,
    tool_choice: { type: "function", function: { name: "get_timetable" } },
  });
  const call = first.choices[0].message.tool_calls[0];
  const result = await runTool(call.function.name, call.function.arguments);
  messages = [...messages,
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", tool_call_id: call.id, content: result }];
  const second = await client.chat.completions.create({ model: OPENAI_MODEL, messages, tools: openaiTools(),
                                                        max_tokens: MAX_TOKENS });
  return second.choices[0].message.content;
}

async function responses(client) {
  const r = await client.responses.create({
    model: OPENAI_MODEL, instructions: SYSTEM_PROMPT, input: HISTORY.map(([role, content]) => ({ role, content })),
    tools: responsesTools(), max_output_tokens: MAX_TOKENS,
  });
  return r.output_text;
}

async function chatError(client) {
  try {
    await client.chat.completions.create({ model: OPENAI_MODEL + "-fail-500", messages: openaiMessages(),
                                           max_tokens: MAX_TOKENS });
  } catch (e) {
    console.log("expected error:", e.constructor.name);
    return e.constructor.name;
  }
  throw new Error("the fake provider did not fail");
}

async function main(scenarios, shutdown) {
  const name = process.argv[2];
  if (!scenarios[name]) {
    console.error(`usage: node ${process.argv[1]} {${Object.keys(scenarios).join("|")}}`);
    process.exit(2);
  }
  try {
    await scenarios[name]();
  } catch (e) {
    console.error(e);
    process.exitCode = 1;
  }
  await shutdown();
}

module.exports = { SYSTEM_PROMPT, LONG_SYSTEM_PROMPT, HISTORY, TOOLS, TOOL_RESULT, OPENAI_MODEL, MAX_TOKENS, env, telemetry, fetchFixture,
  openaiMessages, openaiTools, chat, chatError, chatToolLoop, responses, main };

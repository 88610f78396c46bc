// @traceloop/instrumentation-openai 0.27.0 on openai 6.49 (node/openllmetry). traceContent from
// TRACELOOP_TRACE_CONTENT (default true). Non-LLM spans: the app's parent span and a tool span.
"use strict";
const c = require("../common.js");
const { provider, api, tracer } = c.telemetry(require, "capture-traceloop-openai-js");
const { OpenAIInstrumentation } = require("@traceloop/instrumentation-openai");
const instrumentation = new OpenAIInstrumentation({
  traceContent: (process.env.TRACELOOP_TRACE_CONTENT || "true") !== "false",
});
instrumentation.setTracerProvider(provider);
const OpenAI = require("openai");
instrumentation.manuallyInstrument(OpenAI.OpenAI);  // wants the class (OpenAI.Chat.Completions), not the module
const client = new OpenAI({ baseURL: c.env("FAKE_OPENAI_BASE_URL"), apiKey: "sk-test", maxRetries: 0 });

function inSpan(name, fn) {
  return tracer.startActiveSpan(name, async (s) => {
    try { return await fn(); } finally { s.end(); }
  });
}

function app(body) {
  return () => inSpan("handle_turn", async () => { await c.fetchFixture(); return body(); });
}

c.main({
  chat: app(() => c.chat(client)),
  chat_stream: app(() => c.chat(client, { stream: true })),
  chat_tool_call: app(() => c.chatToolLoop(client, (name) => inSpan(`tool ${name}`, async () => c.TOOL_RESULT))),
  chat_error: app(() => c.chatError(client)),
  responses: app(() => c.responses(client)),
}, () => provider.shutdown());

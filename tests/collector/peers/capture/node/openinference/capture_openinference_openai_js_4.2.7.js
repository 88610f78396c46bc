// @arizeai/openinference-instrumentation-openai 4.2.7 on openai 6.49 (node/openinference).
// Non-LLM spans: an OpenInference AGENT span and a TOOL span from @arizeai/openinference-core's OITracer.
"use strict";
const c = require("../common.js");
const { provider, api, tracer } = c.telemetry(require, "capture-openinference-openai-js");
const { OpenAIInstrumentation } = require("@arizeai/openinference-instrumentation-openai");
const instrumentation = new OpenAIInstrumentation({ tracerProvider: provider });
const OpenAI = require("openai");
instrumentation.manuallyInstrument(OpenAI);
const { OITracer, setSession } = require("@arizeai/openinference-core");
const oi = new OITracer({ tracer });
const client = new OpenAI({ baseURL: c.env("FAKE_OPENAI_BASE_URL"), apiKey: "sk-test", maxRetries: 0 });

function span(name, kind, fn) {
  return oi.startActiveSpan(name, { attributes: { "openinference.span.kind": kind } }, async (s) => {
    try {
      s.setAttribute("input.value", c.HISTORY[2][1]);
      const out = await fn();
      s.setAttribute("output.value", String(out));
      return out;
    } finally {
      s.end();
    }
  });
}

async function runTool(name, args) {
  return span(name, "TOOL", async () => c.TOOL_RESULT);
}

function agent(body) {
  return () => api.context.with(setSession(api.context.active(), { sessionId: "conv-oi-js-1" }),
    () => span("trip_planner", "AGENT", async () => { await c.fetchFixture(); return body(); }));
}

c.main({
  chat: agent(() => c.chat(client)),
  chat_stream: agent(() => c.chat(client, { stream: true })),
  chat_tool_call: agent(() => c.chatToolLoop(client, runTool)),
  chat_error: agent(() => c.chatError(client)),
  responses: agent(() => c.responses(client)),
}, () => provider.shutdown());

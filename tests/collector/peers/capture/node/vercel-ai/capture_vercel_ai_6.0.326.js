// Vercel AI SDK `ai` 6.0.326 + @ai-sdk/openai 3.0.141 (node/vercel-ai), experimental_telemetry on,
// exported by the JS OTel SDK (sdk-trace-node + OTLP proto/grpc/json exporters, per OTEL_EXPORTER_OTLP_PROTOCOL).
// CAPTURE_CONTENT=false -> recordInputs/recordOutputs false.
// Non-LLM spans: the SDK's own outer ai.generateText / ai.streamText spans and ai.toolCall spans.
"use strict";
const c = require("../common.js");
const { provider } = c.telemetry(require, "capture-vercel-ai");
const { generateText, streamText, tool, jsonSchema, stepCountIs } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");

const openai = createOpenAI({ baseURL: c.env("FAKE_OPENAI_BASE_URL"), apiKey: "sk-test" });
const content = process.env.CAPTURE_CONTENT !== "false";
const telemetry = {
  isEnabled: true, functionId: "plan-trip", recordInputs: content, recordOutputs: content,
  metadata: { conversationId: "conv-vercel-1", userId: "user-7" },
};

function tools(execute) {
  const out = {};
  for (const t of c.TOOLS) {
    out[t.name] = tool({ description: t.description, inputSchema: jsonSchema(t.parameters),
                         ...(execute ? { execute: async (input) => execute(t.name, input) } : {}) });
  }
  return out;
}

function call(model) {
  return { model, system: c.SYSTEM_PROMPT, messages: c.HISTORY.map(([role, content]) => ({ role, content })),
           tools: tools(), temperature: 0.2, maxOutputTokens: c.MAX_TOKENS, maxRetries: 0,
           experimental_telemetry: telemetry };
}

async function stream(model) {
  const result = streamText(call(model));
  let text = "";
  for await (const delta of result.textStream) text += delta;
  await result.finishReason;
  return text;
}

c.main({
  chat_generate: async () => (await generateText(call(openai.chat(c.OPENAI_MODEL)))).text,
  chat_stream: () => stream(openai.chat(c.OPENAI_MODEL)),
  responses_generate: async () => (await generateText(call(openai.responses(c.OPENAI_MODEL)))).text,
  responses_stream: () => stream(openai.responses(c.OPENAI_MODEL)),
  chat_error: async () => {
    try {
      await generateText(call(openai.chat(c.OPENAI_MODEL + "-fail-500")));
    } catch (e) {
      console.log("expected error:", e.constructor.name);
      return;
    }
    throw new Error("the fake provider did not fail");
  },
  chat_cache: async () => {
    for (let i = 0; i < 2; i++) {
      await generateText({ ...call(openai.chat(c.OPENAI_MODEL)), system: c.LONG_SYSTEM_PROMPT, tools: undefined });
    }
  },
  chat_tool_loop: async () => (await generateText({
    ...call(openai.chat(c.OPENAI_MODEL)),
    tools: tools(async () => c.TOOL_RESULT),
    stopWhen: stepCountIs(3),
    prepareStep: async ({ stepNumber }) =>
      stepNumber === 0 ? { toolChoice: { type: "tool", toolName: "get_timetable" } } : undefined,
  })).text,
}, () => provider.shutdown());

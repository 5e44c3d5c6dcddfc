// The Vercel AI SDK's tool loop (generateText with tools and a step limit), unmodified, against
// the base URL given: node agent.mjs BASE_URL chat|responses HEADERS_JSON. It reads documents
// a, b and c with its read_doc tool (the SDK runs a step's calls concurrently) and prints one
// JSON line: the final text and the tool calls of each step.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";

const [baseURL, api, headers] = process.argv.slice(2);
const provider = createOpenAI({ baseURL, apiKey: "unused", headers: JSON.parse(headers) });
const model = api === "responses" ? provider.responses("m") : provider.chat("m");

const readDoc = tool({
  description: "Read one document.",
  inputSchema: jsonSchema({
    type: "object",
    properties: { key: { type: "string" } },
    required: ["key"],
  }),
  execute: async ({ key }) => `text of ${key}`,
});

const result = await generateText({
  model,
  system: "You read documents.",
  prompt: "Survey a, b and c.",
  tools: { read_doc: readDoc },
  stopWhen: stepCountIs(8),
  // On the Responses API the proxy stores no responses: the whole conversation goes in each
  // request's input (with store on, the SDK refers to its earlier output items by id).
  ...(api === "responses" ? { providerOptions: { openai: { store: false } } } : {}),
});
console.log(
  JSON.stringify({
    text: result.text,
    steps: result.steps.map((step) => step.toolCalls.map((call) => call.input)),
  }),
);

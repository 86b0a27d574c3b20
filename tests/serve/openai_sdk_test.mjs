// The official OpenAI Node SDK (openai@4, pinned in tests/serve/node/package-lock.json) against a
// running `llmrt serve`: completions, chat, streaming, errors and abort.
//   node openai_sdk_test.mjs BASE_URL API_KEY MODEL_NAME   (NODE_PATH: where `openai` is installed)
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(import.meta.url);
const OpenAI = require('openai');
const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 60000 });
const root = baseURL;

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

async function metric(name) {
  const r = await fetch(root + '/metrics', { headers: { Authorization: `Bearer ${apiKey}` } });
  const text = await r.text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function waitIdle() {
  for (let i = 0; i < 200; i++) {
    if ((await metric('llmrt:num_requests_running{')) === 0 && (await metric('llmrt:kv_cache_usage_perc{')) === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the server did not become idle');
}

await check('models.list', async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, model);
});

let greedy;
await check('completions.create', async () => {
  const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(c.object, 'text_completion');
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(c.usage.completion_tokens, 12);
  assert.ok(c.choices[0].text.length > 0);
  greedy = c.choices[0].text;
});

await check('completions stream equals the whole answer', async () => {
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    if (chunk.choices.length) text += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, greedy);
  assert.equal(usage.completion_tokens, 12);
});

await check('chat.completions.create', async () => {
  const c = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0, seed: 7,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }],
  });
  assert.equal(c.object, 'chat.completion');
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.equal(typeof c.choices[0].message.content, 'string');
  assert.ok(c.usage.prompt_tokens > 5);
});

await check('chat stream', async () => {
  const stream = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0, stream: true,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }],
  });
  let roles = 0;
  let finish = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0];
    if (d.delta.role) roles++;
    if (d.finish_reason) finish = d.finish_reason;
  }
  assert.equal(roles, 1);
  assert.ok(finish === 'length' || finish === 'stop');
});

await check('errors are SDK exceptions with status and param', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', top_p: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'top_p');
  await assert.rejects(
    client.completions.create({ model: 'no-such-model', prompt: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  const bad = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

await check('abort cancels the request and frees its KV blocks', async () => {
  await waitIdle();
  const before = await metric('llmrt:request_success_total{model_name="' + model + '",finished_reason="abort"}');
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (++n === 3) controller.abort();  // the SDK ends the iteration (or throws APIUserAbortError)
    }
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError)) throw e;
  }
  assert.ok(n >= 3 && n < 400, `${n} chunks`);
  await waitIdle();
  const after = await metric('llmrt:request_success_total{model_name="' + model + '",finished_reason="abort"}');
  assert.equal(after, before + 1);
});

console.log(failures === 0 ? 'openai sdk: all passed' : `openai sdk: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);

#!/usr/bin/env node
// Node twin of tokenizer_fixtures.py: the same fixtures from the `tokenizers`
// npm package (HF's Rust library through its Node bindings), for machines
// without Python's `tokenizers`.
//
//   npm install --prefix /tmp/hf tokenizers
//   NODE_PATH=/tmp/hf/node_modules node scripts/golden/tokenizer_fixtures.mjs TOKENIZER_DIR OUT_DIR \
//       [--corpus corpus.json] [--copy-from-shared ../shared/testdata] [--max-bytes N]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const version = require('tokenizers/package.json').version;

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const sharedLayout = {
  'llama2': 'tokenizers/llama2/tokenizer.json',
  'llama3': 'tokenizers/llama3/tokenizer.json',
  'mistral': 'tokenizers/mistral/tokenizer.json',
  'phi-3': 'tokenizers/phi-3/tokenizer.json',
  'qwen2-family': 'tokenizers/qwen2-family/tokenizer.json',
  'falcon': 'tokenizers/falcon/tokenizer.json',
  'gpt2': 'tokenizers/gpt2/tokenizer.json',
  'stories260K': 'models/stories260K-hf/tokenizer.json',
};

const args = process.argv.slice(2);
const positional = [];
let corpusPath = path.join(repo, 'tests', 'data', 'tokenizer', 'corpus.json');
let shared = null;
let maxBytes = 0;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--corpus') corpusPath = args[++i];
  else if (args[i] === '--copy-from-shared') shared = args[++i];
  else if (args[i] === '--max-bytes') maxBytes = Number(args[++i]);
  else positional.push(args[i]);
}
if (positional.length !== 2) {
  console.error('usage: tokenizer_fixtures.mjs TOKENIZER_DIR OUT_DIR [--corpus F] [--copy-from-shared DIR]');
  process.exit(2);
}
const [tokDir, outDir] = positional;
if (shared) {
  for (const [name, rel] of Object.entries(sharedLayout)) {
    const src = path.join(shared, rel);
    if (!fs.existsSync(src)) continue;
    fs.mkdirSync(path.join(tokDir, name), { recursive: true });
    fs.copyFileSync(src, path.join(tokDir, name, 'tokenizer.json'));
  }
}
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'))
  .filter((c) => maxBytes <= 0 || Buffer.byteLength(c.text, 'utf8') <= maxBytes);
fs.mkdirSync(outDir, { recursive: true });
const generator = `tokenizers ${version} (node)`;
for (const name of fs.readdirSync(tokDir).sort()) {
  const file = path.join(tokDir, name, 'tokenizer.json');
  if (!fs.existsSync(file)) continue;
  const tok = Tokenizer.fromFile(file);
  const cases = [];
  for (const c of corpus) {
    const ids = Array.from((await tok.encode(c.text, null, { addSpecialTokens: false })).getIds());
    const idsSpecial = Array.from((await tok.encode(c.text, null, { addSpecialTokens: true })).getIds());
    cases.push({
      id: c.id, text: c.text, ids, ids_special: idsSpecial,
      decode: await tok.decode(idsSpecial, false),
      decode_skip: await tok.decode(idsSpecial, true),
    });
  }
  const header = { tokenizer: name, generator, corpus: 'tests/data/tokenizer/corpus.json' };
  let out = '{\n';
  for (const [k, v] of Object.entries(header)) out += `${JSON.stringify(k)}: ${JSON.stringify(v)},\n`;
  out += '"cases": [\n' + cases.map((c) => JSON.stringify(c)).join(',\n') + '\n]}\n';
  const dest = path.join(outDir, `expected_${name}.json`);
  fs.writeFileSync(dest, out);
  console.log(`${dest}: ${cases.length} cases (${generator})`);
}

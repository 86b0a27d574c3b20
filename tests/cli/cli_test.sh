#!/usr/bin/env bash
# The llmrt command's contract: every bad invocation or file gets a one-line
# error naming the problem and exit code 1 (runtime) or 2 (usage), never a
# signal; good invocations produce the documented output.
# The model-dependent checks run on stories260K (SHARED_TESTDATA_DIR, absent in a fresh clone) or,
# without it, on the bundled llmrt-tiny; each model's exact outputs come from its own reference
# (stories260K: ../shared/testdata/references; llmrt-tiny: its golden.json, HF transformers' greedy
# outputs). The bundled model's exact checks always run; stories260K's own run only where it is.
# Usage: cli_test.sh LLMRT_BINARY SHARED_TESTDATA_DIR [BUNDLED_MODEL_DIR]
set -u
bin=$1
shared=$2
bundled=${3:-$(cd "$(dirname "$0")/../.." && pwd)/models/llmrt-tiny}
stories=$shared/models/stories260K-hf
source "$(dirname "$0")/expect.sh"
ere() { sed 's/[][\\.*^$(){}+?|]/\\&/g' <<<"$1"; }  # $1 as a literal in an extended regex

expect 2 "subcommand" -- "$bin"
expect 2 "bogus|required" -- "$bin" generate --bogus
expect 1 "/nonexistent" -- "$bin" inspect /nonexistent
expect 1 "/nonexistent" -- "$bin" tokenize --tokenizer /nonexistent/tokenizer.json hi
expect 1 "one of --model" -- "$bin" tokenize hi
# Item 14: a tokenizer path that is not a regular file is named at once (a FIFO used to block forever).
mkfifo "$tmp/tok.fifo"
expect 1 "tok.fifo: is a FIFO; expected a regular file" -- timeout 20 "$bin" tokenize --tokenizer "$tmp/tok.fifo" hi
expect 1 "/dev/zero: is a character device" -- timeout 20 "$bin" tokenize --tokenizer /dev/zero hi
expect 1 ": is a directory" -- "$bin" tokenize --tokenizer "$tmp" hi
mkdir -p "$tmp/badcfg"
echo '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 0' >"$tmp/badcfg/config.json"
expect 1 "config.json" -- "$bin" inspect "$tmp/badcfg"

# The bundled model's reference: the first golden case whose continuation is one plain line.
read_golden() {
  python3 - "$bundled/golden.json" <<'PY'
import json, shlex, sys
g = json.load(open(sys.argv[1]))
c = next(c for c in g["cases"] if not any(ch in c["new_text"] for ch in '\n"\\'))
print("m_prompt=" + shlex.quote(c["prompt"]))
print("m_prompt_ids=" + ",".join(map(str, c["prompt_ids"])))
print("m_new_ids=" + ",".join(map(str, c["new_ids"])))
print("m_text=" + shlex.quote(c["new_text"]))
PY
}

# Facts of the model the contract checks run on: its reference prompt (ids with BOS), greedy
# continuation (ids and text) and vocabulary size.
if [[ -f $stories/config.json ]]; then
  model=$stories
  m_prompt="Once upon a time"  # ../shared/testdata/references/stories260K-hf.greedy.json, case 0 (8 tokens)
  m_prompt_ids=1,403,407,261,378
  m_new_ids=432,383,286,261,376,298,315,421
  m_text=", there was a little girl"
  m_vocab=512
else
  model=$bundled
  eval "$(read_golden)"
  m_vocab=8192
fi
m_n=$(tr ',' '\n' <<<"$m_new_ids" | wc -l)
m_prompt_len=$(tr ',' '\n' <<<"$m_prompt_ids" | wc -l)
m_ids_re='"token_ids": ?\['$(sed 's/,/, ?/g' <<<"$m_new_ids")'\]'
m_no_bos=${m_prompt_ids#*,}

if [[ -f $model/config.json ]]; then
  echo "cli_test: model-dependent checks on $model"
  expect 1 "/nonexistent" -- "$bin" generate --model /nonexistent --prompt hi
  expect 2 "--prompt, --input-ids or --input-file" -- "$bin" generate --model "$model"
  expect 2 "max.tokens" -- "$bin" generate --model "$model" --prompt hi --max-tokens 0
  expect 2 "not a token id" -- "$bin" generate --model "$model" --input-ids 1,abc
  long=$(seq -s, 1 600 | sed 's/[0-9]\+/5/g')
  expect 1 "max_seq_len" -- "$bin" generate --model "$model" --input-ids "$long"
  expect 2 "top_p" -- "$bin" generate --model "$model" --prompt hi --temperature 1 --top-p 1.5
  expect 1 "outside|\\[0, $m_vocab\\)" -- "$bin" generate --model "$model" --input-ids 1,70000
  expect 1 "/nonexistent" -- "$bin" perplexity --model "$model" --file /nonexistent
  expect 2 "log_level" -- "$bin" generate --model "$model" --prompt hi --log-level loud
  expect 1 "cannot open" -- "$bin" generate --model "$model" --prompt hi --output-logits-npy /nonexistent/x.npy
  expect 2 "outside the vocabulary" -- "$bin" detokenize --model "$model" 1 9999

  # Good paths.
  expect 0 "^$(ere "$m_prompt$m_text")\$" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens "$m_n"
  expect 0 "$m_ids_re" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens "$m_n" --json
  expect 0 '"finish_reason": ?"length"' -- "$bin" generate --model "$model" --input-ids "$m_prompt_ids" --max-tokens 4 --json
  expect 0 "" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens 3 \
    --output-logits-npy "$tmp/ctx.npy" --output-generation-logits-npy "$tmp/gen.npy" --json
  # .npy: 128-byte header (numpy pads it to 64-byte multiples) + float32 payload.
  ctx_size=$(stat -c %s "$tmp/ctx.npy" 2>/dev/null || echo 0)
  gen_size=$(stat -c %s "$tmp/gen.npy" 2>/dev/null || echo 0)
  if [[ $ctx_size -eq $((128 + m_prompt_len * m_vocab * 4)) && $gen_size -eq $((128 + 3 * m_vocab * 4)) ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: npy sizes $ctx_size $gen_size"
  fi
  expect 0 "^${m_prompt_ids//,/ }\$" -- "$bin" tokenize --model "$model" "$m_prompt"
  expect 0 "^$(ere "$m_prompt")\$" -- "$bin" detokenize --model "$model" "$m_no_bos"
  expect 0 "^$(ere "$m_text")\$" -- "$bin" detokenize --model "$model" "$m_new_ids"
  printf 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. %.0s' $(seq 1 30) >"$tmp/text.txt"
  expect 0 "Final estimate: PPL = " -- "$bin" perplexity --model "$model" --file "$tmp/text.txt" --context 128

  # Batch mode (tools/llmrt/generate_batch.h): JSON lines in, exactly one result row per
  # request out, in input order; statistics on stderr or --stats-file, never among the rows.
  printf '%s\n' "{\"prompt\": \"$m_prompt\", \"max_tokens\": $m_n}" "{\"input_ids\": [$m_prompt_ids], \"max_tokens\": 4}" \
    '{"input_ids": [1, 9999], "max_tokens": 3}' \
    '{"prompt": "The dog", "max_tokens": 5, "temperature": 0.8, "seed": 3, "kv_cache_retention_config": {"token_range_retention_configs": [{"token_start": 0, "token_end": 2, "priority": 90}]}}' \
    >"$tmp/batch.jsonl"
  row0='"index":0,"outputs":\[\{"finish_reason":"length","index":0,"text":"'$(ere "$m_text")'","token_ids":\['$m_new_ids'\]\}\]'
  expect 0 "$row0" -- "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --scheduler-policy max_utilization --kv-cache-max-tokens 64 --tokens-per-block 4
  expect 0 '"error":"[^"]*batch.jsonl:3: [^"]*9999[^"]*","finish_reason":"error","index":2' -- "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --disable-chunked-context --max-batch-size 2
  expect 0 '^llmrt: stats: \{.*"kv_reuse_hit_rate".*"requests":4' -- "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --context-chunking-policy equal_progress --max-num-tokens 16 --tokens-per-block 4 --disable-block-reuse
  "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --output-file "$tmp/out.jsonl" --stats-file "$tmp/stats.json" >"$tmp/stdout.txt" 2>&1
  if [[ $(wc -l <"$tmp/out.jsonl") -eq 4 ]] && ! grep -q '"stats"\|"steps"' "$tmp/out.jsonl" &&
     [[ $(python3 -c 'import json, sys; print(*[json.loads(l)["index"] for l in open(sys.argv[1])])' "$tmp/out.jsonl") == "0 1 2 3" ]] &&
     grep -q '"requests":4' "$tmp/stats.json" && [[ $(wc -l <"$tmp/stats.json") -eq 1 ]] && ! grep -q 'stats' "$tmp/stdout.txt"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: --output-file / --stats-file content: $(head -c 600 "$tmp/out.jsonl" "$tmp/stats.json" "$tmp/stdout.txt" 2>&1)"
  fi
  expect 2 "stats-file" -- "$bin" generate --model "$model" --prompt hi --stats-file "$tmp/s.json"

  # A bad line is that request's error row (naming file, line and field); the others still run.
  check_rows() {  # check_rows FILE WANT_ROWS PATTERN...: the file has WANT_ROWS lines and each PATTERN
    local file=$1 want=$2 ok=1
    shift 2
    [[ $(wc -l <"$file") -eq $want ]] || ok=0
    for pat in "$@"; do grep -qE -- "$pat" "$file" || { ok=0; echo "  missing: $pat"; }; done
    if [[ $ok == 1 ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: rows of $file: $(head -c 1500 "$file")"; fi
  }
  run_batch() {  # run_batch NAME: runs $tmp/NAME.jsonl into $tmp/NAME.out, expecting exit 0
    local rc
    "$bin" generate --model "$model" --input-file "$tmp/$1.jsonl" --output-file "$tmp/$1.out" --max-tokens 4 >"$tmp/$1.err" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then fail=$((fail + 1)); echo "FAIL: batch $1 exit $rc: $(head -c 400 "$tmp/$1.err")"; fi
  }
  printf '%s\n' '{"prompt": "a"}' '{"prompt": ' '{"prompt": "a", "bogus": 1}' '{"max_tokens": 3}' \
    '{"prompt": "a", "max_tokens": "many"}' '[1, 2]' >"$tmp/bad.jsonl"
  run_batch bad
  check_rows "$tmp/bad.out" 6 '"index":0,"outputs":' \
    '"error":"[^"]*bad.jsonl:2: invalid JSON[^"]*","finish_reason":"error","index":1\}' \
    "\"error\":\"[^\"]*bad.jsonl:3: unknown field 'bogus'" \
    "bad.jsonl:4: exactly one of 'prompt' or 'input_ids' is required\",\"finish_reason\":\"error\",\"index\":3\}" \
    "bad.jsonl:5: field 'max_tokens' has value ..many..; expected an integer" \
    'bad.jsonl:6: expected a JSON object'
  expect 0 "warning: 5 of 6 requests failed" -- "$bin" generate --model "$model" --input-file "$tmp/bad.jsonl" --max-tokens 2
  # Item 4: kv_cache_retention_config is read strictly too.
  pre='{"prompt": "a", "kv_cache_retention_config": '
  printf '%s\n' "$pre"'{"decode_retention_priorty": 90}}' \
    "$pre"'{"token_range_retention_configs": [{"token_start": 0, "prioirty": 90}]}}' \
    "$pre"'{"token_range_retention_configs": [{"token_start": 0, "priority": 100.7}]}}' \
    "$pre"'{"token_range_retention_configs": [{"token_start": 0, "token_end": 99999999999}]}}' \
    "$pre"'{"token_range_retention_configs": [{"token_start": 0, "duration_ms": 1e30}]}}' \
    "$pre"'{"token_range_retention_configs": [{"token_start": 0, "token_end": 2, "priority": 100, "duration_ms": 60000}], "decode_retention_priority": 1}}' \
    >"$tmp/retention.jsonl"
  run_batch retention
  check_rows "$tmp/retention.out" 6 \
    "retention.jsonl:1: unknown field 'kv_cache_retention_config.decode_retention_priorty'" \
    "retention.jsonl:2: unknown field 'kv_cache_retention_config.token_range_retention_configs\[0\].prioirty'" \
    "retention.jsonl:3: field 'kv_cache_retention_config.token_range_retention_configs\[0\].priority' has value 100.7; expected an integer in \[1, 100\]" \
    "retention.jsonl:4: field '[^']*token_end' has value 99999999999" \
    "retention.jsonl:5: field '[^']*duration_ms' has value 1e\+30" \
    '"index":5,"outputs":'
  if grep -q -- '-9223372036854775808' "$tmp/retention.out"; then fail=$((fail + 1)); echo "FAIL: duration_ms wrapped"; fi
  # Item 13: integers are integers in range, floats finite, null no value; the good line runs.
  printf '%s\n' '{"prompt": "a", "max_tokens": 4294967297}' '{"prompt": "a", "top_k": 4294967296}' \
    '{"prompt": "a", "max_tokens": 3.9}' '{"input_ids": [1, 5.7]}' '{"prompt": "a", "max_tokens": 1e30}' \
    '{"prompt": "a", "seed": -1}' '{"prompt": null}' '{"prompt": "a", "temperature": 1e39}' \
    '{"prompt": "a", "max_tokens": 3.0}' '{"input_ids": [1, 403], "max_tokens": 2, "seed": 18446744073709551615}' \
    >"$tmp/numbers.jsonl"
  run_batch numbers
  check_rows "$tmp/numbers.out" 10 \
    "numbers.jsonl:1: field 'max_tokens' has value 4294967297; expected an integer in \[1, 2147483647\]" \
    "numbers.jsonl:2: field 'top_k' has value 4294967296" \
    "numbers.jsonl:3: field 'max_tokens' has value 3.9" \
    "numbers.jsonl:4: field 'input_ids\[1\]' has value 5.7" \
    "numbers.jsonl:5: field 'max_tokens' has value 1e\+30" \
    "numbers.jsonl:6: field 'seed' has value -1" \
    "numbers.jsonl:7: field 'prompt' has value null; expected a string" \
    "numbers.jsonl:8: field 'temperature' has value 1e\+39" \
    "numbers.jsonl:9: field 'max_tokens' has value 3.0" \
    '"index":9,"outputs":\[\{"finish_reason":"length","index":0,"text":"[^"]*","token_ids":\[[0-9]+,[0-9]+\]'
  # Whole-run errors: one line on stderr, exit 1, nothing on stdout, no output file.
  expect_one_line() {  # expect_one_line CODE PATTERN -- command...: exit CODE, stderr one line matching, stdout empty
    local code=$1 pattern=$2 rc
    shift 3
    "$@" >"$tmp/ol.out" 2>"$tmp/ol.err"
    rc=$?
    if [[ $rc -eq $code && $(wc -l <"$tmp/ol.err") -eq 1 && ! -s "$tmp/ol.out" ]] && grep -qE -- "$pattern" "$tmp/ol.err"; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1)); echo "FAIL: $* -> exit $rc (want $code), stdout $(head -c 200 "$tmp/ol.out"), stderr: $(head -c 400 "$tmp/ol.err")"
    fi
  }
  printf '\n  \n\t\n' >"$tmp/blank.jsonl"
  expect_one_line 1 "blank.jsonl: no requests" -- "$bin" generate --model "$model" --input-file "$tmp/blank.jsonl"
  printf '{\n  "prompt": "a"\n}\n' >"$tmp/pretty.json"
  expect_one_line 1 "pretty.json: not JSON lines: no line is a JSON object" -- "$bin" generate --model "$model" --input-file "$tmp/pretty.json"
  printf '{"prompt": "a"}\n\0\0\0\n' >"$tmp/nul.jsonl"
  expect_one_line 1 "nul.jsonl: NUL byte at offset 16" -- "$bin" generate --model "$model" --input-file "$tmp/nul.jsonl"
  expect_one_line 1 "nonexistent.jsonl: cannot open: No such file" -- "$bin" generate --model "$model" --input-file "$tmp/nonexistent.jsonl"
  # Item 14: the file's type is looked at before it is opened or read.
  mkdir -p "$tmp/dir.jsonl"
  expect_one_line 1 "dir.jsonl: is a directory; expected a regular file" -- "$bin" generate --model "$model" --input-file "$tmp/dir.jsonl"
  expect_one_line 1 "/dev/zero: is a character device" -- timeout 20 "$bin" generate --model "$model" --input-file /dev/zero
  mkfifo "$tmp/fifo.jsonl"
  expect_one_line 1 "fifo.jsonl: is a FIFO" -- timeout 20 "$bin" generate --model "$model" --input-file "$tmp/fifo.jsonl"
  expect_one_line 1 "/dev/zero: is a character device" -- timeout 20 "$bin" perplexity --model "$model" --file /dev/zero
  expect_one_line 1 "fifo.jsonl: is a FIFO" -- timeout 20 "$bin" perplexity --model "$model" --file "$tmp/fifo.jsonl"
  expect_one_line 1 "dir.jsonl: is a directory" -- "$bin" perplexity --model "$model" --file "$tmp/dir.jsonl"
  # Standard input as the request file ("-").
  expect 0 "$row0" -- bash -c "\"\$0\" generate --model \"\$1\" --input-file - <\"\$2\"" "$bin" "$model" "$tmp/batch.jsonl"

  # Item 9: the output never overwrites the input (compared by inode), and is replaced atomically.
  cp "$tmp/batch.jsonl" "$tmp/keep.jsonl"
  ln "$tmp/keep.jsonl" "$tmp/hardlink.jsonl"
  ln -s keep.jsonl "$tmp/symlink.jsonl"
  for same in "$tmp/keep.jsonl" "$tmp/./keep.jsonl" "$tmp/hardlink.jsonl" "$tmp/symlink.jsonl"; do
    expect_one_line 2 "--output-file .* is the input file" -- "$bin" generate --model "$model" --input-file "$tmp/keep.jsonl" --output-file "$same"
  done
  expect_one_line 2 "--stats-file .* is the input file" -- "$bin" generate --model "$model" --input-file "$tmp/keep.jsonl" --stats-file "$tmp/hardlink.jsonl"
  expect_one_line 2 "--stats-file .* is the output file" -- "$bin" generate --model "$model" --input-file "$tmp/keep.jsonl" --output-file "$tmp/o.jsonl" --stats-file "$tmp/./o.jsonl"
  if cmp -s "$tmp/batch.jsonl" "$tmp/keep.jsonl"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the input file was changed"; fi
  # A failed run leaves an existing output file as it was, and no temporary file behind.
  mkdir -p "$tmp/outdir"
  echo OLD >"$tmp/outdir/out.jsonl"
  "$bin" generate --model "$model" --input-file "$tmp/blank.jsonl" --output-file "$tmp/outdir/out.jsonl" >/dev/null 2>&1
  "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --output-file "$tmp/outdir/out.jsonl" --stats-file "$tmp/nodir/s.json" >/dev/null 2>&1
  if [[ $(cat "$tmp/outdir/out.jsonl") == OLD && $(ls -A "$tmp/outdir") == out.jsonl ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: a failed run touched the output: $(ls -A "$tmp/outdir"; head -c 200 "$tmp/outdir/out.jsonl")"
  fi
  # A run killed while writing (here by the file size limit, SIGXFSZ) leaves the old file, not a truncated one.
  for i in $(seq 1 20); do echo '{"prompt": "Once upon a time", "max_tokens": 16}'; done >"$tmp/twenty.jsonl"
  { (ulimit -f 2; exec "$bin" generate --model "$model" --input-file "$tmp/twenty.jsonl" --output-file "$tmp/outdir/out.jsonl") >/dev/null 2>&1; } 2>/dev/null
  if [[ $(cat "$tmp/outdir/out.jsonl") == OLD ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: a killed run left a partial output: $(head -c 200 "$tmp/outdir/out.jsonl")"
  fi
  # A complete run replaces the file (a new inode: renamed over it, never rewritten in place).
  inode=$(stat -c %i "$tmp/outdir/out.jsonl")
  "$bin" generate --model "$model" --input-file "$tmp/twenty.jsonl" --output-file "$tmp/outdir/out.jsonl" >/dev/null 2>&1
  if [[ $(wc -l <"$tmp/outdir/out.jsonl") -eq 20 && $(stat -c %i "$tmp/outdir/out.jsonl") != "$inode" ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: output not replaced atomically: $(wc -l <"$tmp/outdir/out.jsonl") rows, inode $inode"
  fi
  expect 2 "excludes" -- "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --prompt hi
  expect 2 "scheduler-policy" -- "$bin" generate --model "$model" --input-file "$tmp/batch.jsonl" --scheduler-policy fastest
  expect 2 "kv-cache-dtype" -- "$bin" generate --model "$model" --prompt hi --kv-cache-dtype fp4
  expect 2 "KvCacheConfig.*dtype.*(CPU backend|backend cpu)" -- "$bin" generate --model "$model" --prompt hi --backend cpu --kv-cache-dtype bfloat16
  expect 2 "Engine(Options|Config).*dtype.*CPU backend" -- "$bin" generate --model "$model" --prompt hi --backend cpu --dtype float16
  expect 2 "dtype" -- "$bin" generate --model "$model" --prompt hi --dtype half
  expect 0 "$m_ids_re" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens "$m_n" --json --backend cpu --kv-cache-dtype float32
  # Overlap scheduling (on forced on the CPU): the same tokens; a bad value names the flag.
  expect 0 "$m_ids_re" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens "$m_n" --json --backend cpu --overlap on
  expect 2 "overlap" -- "$bin" generate --model "$model" --prompt hi --overlap sometimes
  # A step smaller than a KV block (3 tokens, blocks of 32): the prompt is chunked anyway (this hung).
  expect 0 "$m_ids_re" -- "$bin" generate --model "$model" --prompt "$m_prompt" --max-tokens "$m_n" --json --max-num-tokens 3
fi

# stories260K's own facts (its tokenizer and size).
stories_exact() {
  # As HF tokenizers 0.23: id_to_token(1) is "▁<s>" (a normalized added token), and decoding
  # keeps such tokens even with skip_special_tokens (verified on the GPU machine's tokenizers).
  expect 0 '"tokens": ?\["▁<s>", ?"▁Once"' -- "$bin" tokenize --model "$stories" --json "Once upon a time"
  expect 0 "^<s> Once upon a time$" -- "$bin" detokenize --model "$stories" --skip-special 1,403,407,261,378
  expect 0 "parameters: +260.0K" -- "$bin" inspect "$stories"
}
if [[ -f $stories/config.json ]]; then
  stories_exact
else
  skip_checks "shared test data absent: $stories" stories_exact
fi

# A directory without tokenizer.json: its tokenizer.model (SentencePiece) gives the same prompt ids
# (BOS first; the piece itself is "<s>") and the same greedy text.
stories_sentencepiece() {
  expect 0 '"ids": ?\[1, ?403, ?407, ?261, ?378\], ?"tokens": ?\["<s>", ?"▁Once"' -- \
    "$bin" tokenize --model "$tmp/stories-sp" --json "Once upon a time"
  expect 0 "^Once upon a time, there was a little girl named Lily" -- \
    "$bin" generate --model "$tmp/stories-sp" --prompt "Once upon a time" --max-tokens 16 --temperature 0
  expect 1 "tokenizer.model: not a valid SentencePiece model \(truncated or corrupt\?\)" -- \
    "$bin" tokenize --model "$tmp/stories-sp-cut" hi
}
if [[ -f $stories/tokenizer.model ]]; then
  mkdir -p "$tmp/stories-sp" "$tmp/stories-sp-cut"
  for f in config.json model.safetensors generation_config.json tokenizer.model tokenizer_config.json; do
    cp "$stories/$f" "$tmp/stories-sp/"
  done
  head -c 3000 "$stories/tokenizer.model" >"$tmp/stories-sp-cut/tokenizer.model"
  if "$bin" tokenize --model "$tmp/stories-sp" hi 2>&1 | grep -q "no SentencePiece support"; then
    skip_checks "this build has no SentencePiece (LLMRT_SENTENCEPIECE=OFF)" stories_sentencepiece
  else
    stories_sentencepiece
  fi
else
  skip_checks "shared test data absent: $stories" stories_sentencepiece
fi

# The bundled model's own facts, always: every golden.json case through batch mode (text prompts,
# so tokenization too) gives HF transformers' greedy ids and text; its tokenizer and size.
python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    print(json.dumps({"prompt": c["prompt"], "max_tokens": len(c["new_ids"]), "ignore_eos": True}))' \
  "$bundled/golden.json" >"$tmp/golden.jsonl"
"$bin" generate --model "$bundled" --input-file "$tmp/golden.jsonl" --output-file "$tmp/golden.out" 2>"$tmp/golden.err"
if python3 - "$bundled/golden.json" "$tmp/golden.out" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
rows = [json.loads(line) for line in open(sys.argv[2])]
bad = [c["prompt"] for c, r in zip(cases, rows)
       if r.get("prompt_token_ids") != c["prompt_ids"] or r["outputs"][0]["token_ids"] != c["new_ids"]
       or r["outputs"][0]["text"] != c["new_text"]]
if len(rows) != len(cases) or bad:
    print(f"golden cases differ: {bad} ({len(rows)} rows for {len(cases)} cases)")
    sys.exit(1)
PY
then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: golden.json through batch mode: $(head -c 600 "$tmp/golden.out" "$tmp/golden.err" 2>&1)"
fi
expect 0 '^\{"ids": ?\[0, ?464\], ?"tokens": ?\["<\|begin_of_text\|>", ?"The"\]\}$' -- "$bin" tokenize --model "$bundled" --json "The"
expect 0 "^The$" -- "$bin" detokenize --model "$bundled" --skip-special 0,464
expect 0 "^<\|begin_of_text\|>The$" -- "$bin" detokenize --model "$bundled" 0,464
expect 0 "parameters: +12.59M \(12587904\)" -- "$bin" inspect "$bundled"

# llmrt quantize --method fp8: a new directory that loads and is described as fp8.
expect 0 "42 matrices quantized to fp8, 14 tensors copied" -- "$bin" quantize --model "$bundled" --output "$tmp/fp8"
expect 0 "quantization: +fp8 \(per-tensor or per-channel scales\)" -- "$bin" inspect "$tmp/fp8"
expect 0 "." -- "$bin" generate --model "$tmp/fp8" --prompt "The program" --max-tokens 8 --threads 2
expect 1 "exists and is not an empty directory" -- "$bin" quantize --model "$bundled" --output "$tmp/fp8"
expect 1 "is already quantized" -- "$bin" quantize --model "$tmp/fp8" --output "$tmp/fp8-again"
# --method int8: int8 codes, read back as an INT8 checkpoint.
expect 0 "42 matrices quantized to int8, 14 tensors copied" -- "$bin" quantize --method int8 --model "$bundled" --output "$tmp/int8"
expect 0 "quantization: +int8 \(per-tensor or per-channel scales\)" -- "$bin" inspect "$tmp/int8"
expect 1 "--method has value 'gptq'; expected fp8, int8, smoothquant or awq" -- "$bin" quantize --method gptq --model "$bundled" --output "$tmp/gptq"
expect 1 "calibration text" -- "$bin" quantize --method smoothquant --model "$bundled" --output "$tmp/sq" --calib-file "$tmp/missing.txt"
expect 1 "alpha has value" -- "$bin" quantize --method smoothquant --model "$bundled" --output "$tmp/sq" --alpha 1.5
expect 2 "output" -- "$bin" quantize --model "$bundled"

if [[ $skipped -gt 0 ]]; then echo "cli_test: $skipped checks skipped ($skip_reasons)"; fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]

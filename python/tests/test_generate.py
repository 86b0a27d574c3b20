"""generate / generate_async: prompt forms, streaming, concurrency, threads, the GIL, logits,
logprobs, request errors."""
import asyncio
import threading
import time

import numpy as np
import pytest

from llmrt import LLM, RequestOutput, SamplingParams

from conftest import PROMPTS

GREEDY = SamplingParams(max_tokens=24)


def texts(outs):
    return [o.outputs[0].text for o in outs]


def test_prompt_forms_agree(llm):
    by_text = llm.generate(PROMPTS[0], GREEDY, use_tqdm=False)
    assert isinstance(by_text, RequestOutput) and by_text.finished
    assert by_text.prompt == PROMPTS[0]
    ids = llm.tokenizer.encode(PROMPTS[0])
    assert by_text.prompt_token_ids == ids
    by_ids = llm.generate(ids, GREEDY, use_tqdm=False)
    by_dict = llm.generate([{"prompt": PROMPTS[0]}, {"prompt_token_ids": ids}], GREEDY, use_tqdm=False)
    assert by_ids.outputs[0].token_ids == by_text.outputs[0].token_ids
    assert [o.outputs[0].token_ids for o in by_dict] == [by_text.outputs[0].token_ids] * 2
    assert by_text.outputs[0].text == llm.tokenizer.decode(by_text.outputs[0].token_ids)
    assert by_text.outputs[0].finish_reason == "length" and len(by_text.outputs[0].token_ids) == 24


def test_batch_equals_one_at_a_time(llm):
    together = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    alone = [llm.generate(p, GREEDY, use_tqdm=False) for p in PROMPTS]
    assert [o.prompt for o in together] == PROMPTS
    assert texts(together) == texts(alone)


def test_per_prompt_sampling_params(llm):
    sps = [SamplingParams(max_tokens=k + 1) for k in range(len(PROMPTS))]
    outs = llm.generate(PROMPTS, sps, use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in outs] == [k + 1 for k in range(len(PROMPTS))]
    with pytest.raises(ValueError, match="2 sampling_params for 6 prompts"):
        llm.generate(PROMPTS, sps[:2], use_tqdm=False)


def test_seeded_sampling_is_reproducible_and_n_gives_n(llm):
    sp = SamplingParams(max_tokens=12, temperature=1.0, top_p=0.95, seed=7, n=3)
    a = llm.generate(PROMPTS[1], sp, use_tqdm=False)
    b = llm.generate(PROMPTS[1], sp, use_tqdm=False)
    assert len(a.outputs) == 3 and [c.index for c in a.outputs] == [0, 1, 2]
    assert [c.token_ids for c in a.outputs] == [c.token_ids for c in b.outputs]


def test_streaming_yields_the_blocking_text(llm):
    blocking = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    for p, want in zip(PROMPTS, blocking):
        handle = llm.generate_async(p, GREEDY, streaming=True)
        pieces, ids = [], []
        for state in handle:
            pieces.append(state.outputs[0].text_diff)
            ids.extend(state.outputs[0].token_ids_diff)
        assert len(pieces) > 1
        assert "".join(pieces) == want.outputs[0].text == handle.outputs[0].text
        assert ids == want.outputs[0].token_ids == handle.outputs[0].token_ids
        assert handle.finished and handle.outputs[0].finish_reason == "length"


def test_async_streaming_and_await(llm):
    blocking = texts(llm.generate(PROMPTS, GREEDY, use_tqdm=False))

    async def stream(p):
        text = ""
        async for state in llm.generate_async(p, GREEDY, streaming=True):
            text += state.outputs[0].text_diff
        return text

    async def main():
        streamed = await asyncio.gather(*(stream(p) for p in PROMPTS))
        awaited = await asyncio.gather(*(llm.generate_async(p, GREEDY) for p in PROMPTS))
        return streamed, [o.outputs[0].text for o in awaited]

    streamed, awaited = asyncio.run(main())
    assert streamed == blocking and awaited == blocking


def test_many_concurrent_async_equal_sequential(llm):
    prompts = [f"{PROMPTS[i % len(PROMPTS)]} {i}" for i in range(48)]
    sp = SamplingParams(max_tokens=16)
    sequential = [llm.generate(p, sp, use_tqdm=False).outputs[0].text for p in prompts]
    handles = [llm.generate_async(p, sp) for p in prompts]
    assert [h.result(timeout=120).outputs[0].text for h in handles] == sequential


def test_threads_generate_concurrently(llm):
    want = texts(llm.generate(PROMPTS, GREEDY, use_tqdm=False))
    results, errors = {}, []

    def worker(k):
        try:
            for _ in range(3):
                got = texts(llm.generate(PROMPTS[k:] + PROMPTS[:k], GREEDY, use_tqdm=False))
                assert got == want[k:] + want[:k]
            results[k] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert len(results) == 4


def test_gil_is_released_during_generate(llm):
    ticks = 0
    stop = threading.Event()

    def counter():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=counter)
    t.start()
    start = time.monotonic()
    try:
        llm.generate([p + " again" for p in PROMPTS] * 4, SamplingParams(max_tokens=64, ignore_eos=True),
                     use_tqdm=False)
    finally:
        stop.set()
        t.join()
    elapsed = time.monotonic() - start
    # With the GIL held for the whole call the counter would not move; released, it ticks about
    # once a millisecond (sleep granularity and 2 cores allow far less; a tenth is plenty).
    assert elapsed > 0.05
    assert ticks > 0.1 * elapsed * 1000, (ticks, elapsed)


def test_logprobs(llm):
    out = llm.generate(PROMPTS[0], SamplingParams(max_tokens=6, logprobs=2), use_tqdm=False)
    c = out.outputs[0]
    assert len(c.logprobs) == 6
    for tok, entry in zip(c.token_ids, c.logprobs):
        assert tok in entry and entry[tok].rank == 1  # greedy picks the most likely token
        assert all(lp.logprob <= 0 for lp in entry.values())
    assert c.cumulative_logprob == pytest.approx(sum(e[t].logprob for t, e in zip(c.token_ids, c.logprobs)))


def test_logits_are_numpy_arrays(llm):
    sp = SamplingParams(max_tokens=5, return_context_logits=True, return_generation_logits=True, logprobs=1)
    out = llm.generate(PROMPTS[2], sp, use_tqdm=False)
    vocab = llm.model_config["vocab_size"]
    ctx, gen = out.context_logits, out.outputs[0].generation_logits
    assert isinstance(ctx, np.ndarray) and ctx.dtype == np.float32
    assert ctx.shape == (len(out.prompt_token_ids), vocab)
    assert isinstance(gen, np.ndarray) and gen.shape == (5, vocab)
    assert ctx.base is not None  # a view of the C++ vector, not a copy
    # Greedy: each token is the argmax of its generation logits; the first is the argmax of the
    # last prompt position's context logits.
    assert list(gen.argmax(axis=1)) == out.outputs[0].token_ids
    assert int(ctx[-1].argmax()) == out.outputs[0].token_ids[0]
    assert gen[0] == pytest.approx(ctx[-1], rel=1e-4, abs=1e-4)
    # log_softmax of the logits is the reported logprob.
    row = gen[1].astype(np.float64)
    lse = np.log(np.exp(row - row.max()).sum()) + row.max()
    t = out.outputs[0].token_ids[1]
    assert out.outputs[0].logprobs[1][t].logprob == pytest.approx(row[t] - lse, abs=1e-4)
    plain = llm.generate(PROMPTS[2], SamplingParams(max_tokens=5), use_tqdm=False)
    assert plain.context_logits is None and plain.outputs[0].generation_logits is None


def test_stop_strings_and_ids(llm):
    base = llm.generate(PROMPTS[0], GREEDY, use_tqdm=False).outputs[0]
    word = base.text.split()[2]
    cut = llm.generate(PROMPTS[0], SamplingParams(max_tokens=24, stop=word), use_tqdm=False).outputs[0]
    assert cut.finish_reason == "stop" and word not in cut.text and base.text.startswith(cut.text)
    by_id = llm.generate(PROMPTS[0], SamplingParams(max_tokens=24, stop_token_ids=[base.token_ids[3]]),
                         use_tqdm=False).outputs[0]
    assert by_id.finish_reason == "stop" and by_id.token_ids[-1] == base.token_ids[3]


def test_request_errors_leave_the_engine_running(llm):
    too_long = [1] + [300] * 600  # the bundled model's max_seq_len is 512
    with pytest.raises(ValueError, match="512|max_seq_len|max_input_len"):
        llm.generate(too_long, GREEDY, use_tqdm=False)
    with pytest.raises(ValueError, match="token id|vocab"):
        llm.generate([1, 10 ** 6], GREEDY, use_tqdm=False)
    with pytest.raises(TypeError, match="prompt"):
        llm.generate([[1.5, 2]], GREEDY, use_tqdm=False)
    with pytest.raises(TypeError, match="lora"):
        llm.generate("x", GREEDY, lora_requst=None)
    assert llm.generate(PROMPTS[0], GREEDY, use_tqdm=False).outputs[0].text


def test_abort_ends_a_request(llm):
    h = llm.generate_async(PROMPTS[3], SamplingParams(max_tokens=400, ignore_eos=True), streaming=True)
    for _ in h:
        h.abort()
    assert h.finished and h.outputs[0].finish_reason == "cancelled"
    assert len(h.outputs[0].token_ids) < 400


def test_result_timeout(llm):
    h = llm.generate_async(PROMPTS[4], SamplingParams(max_tokens=400, ignore_eos=True))
    with pytest.raises(TimeoutError):
        h.result(timeout=0.001)
    h.abort()
    assert h.result().outputs[0].finish_reason == "cancelled"


def test_progress_bar(llm, capsys):
    llm.generate(PROMPTS, SamplingParams(max_tokens=2), use_tqdm="always")
    err = capsys.readouterr().err
    assert "Processed prompts" in err and f"{len(PROMPTS)}/{len(PROMPTS)}" in err
    llm.generate(PROMPTS, SamplingParams(max_tokens=2), use_tqdm=True)  # stderr is not a terminal here
    assert capsys.readouterr().err == ""


def test_stats_and_iteration_stats(model):
    with LLM(model, num_threads=2, iter_stats_max_iterations=100) as llm:
        llm.generate(PROMPTS, GREEDY, use_tqdm=False)
        s = llm.stats()
        assert s["generated_tokens"] == 24 * len(PROMPTS) and s["steps"] > 0
        it = llm.get_stats()
        assert it and it[0]["iter"] >= 1
        assert sum(i["inflight_batching_stats"]["num_ctx_tokens"] for i in it) == s["context_tokens"]
        assert {"used_num_blocks", "free_num_blocks", "max_num_blocks"} <= set(it[-1]["kv_cache_stats"])
        assert llm.get_stats() == []  # drained

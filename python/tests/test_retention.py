"""KvCacheRetentionConfig as the seed uses it: the blocks of a 4-token prefix kept at priority 100
survive a pool pressure that evicts the default-priority (35) blocks, seen through
get_kv_cache_events() and cached_tokens (the scenario of examples/kv_cache_retention.cpp)."""
import pytest

from llmrt import LLM, KvCacheConfig, SamplingParams
from llmrt.llmapi import KvCacheRetentionConfig

SYSTEM = [1, 403, 407, 261]  # "<s> Once upon a": one block of 4 tokens
SP = SamplingParams(max_tokens=8)


def pressure(k):
    return [1] + [300 + (k * 37 + i * 11) % 200 for i in range(40)]


def run(model, retention):
    """(cached prompt tokens of the second system-prompt request, events, evicted blocks)."""
    kv = KvCacheConfig(tokens_per_block=4, max_tokens=64, event_buffer_max_size=1024)
    with LLM(model, num_threads=1, kv_cache_config=kv) as llm:
        llm.generate(SYSTEM + [378, 432], SP, kv_cache_retention_config=retention, use_tqdm=False)
        for k in range(3):  # unrelated prompts that need most of the 16 blocks
            llm.generate(pressure(k), SP, use_tqdm=False)
        again = llm.generate(SYSTEM + [298, 315], SP, kv_cache_retention_config=retention, use_tqdm=False)
        events = llm.get_kv_cache_events(timeout=1)
        return again.cached_tokens, events, llm.stats()["evicted_blocks"]


def first_block_hash(events):
    for e in events:
        d = e["data"]
        if d["type"] == "stored" and d["parent_hash"] is None:
            b = d["blocks"][0]
            if [t["token_id"] for t in b["tokens"]] == SYSTEM:
                return b["block_hash"], b["priority"]
    raise AssertionError("no stored event for the system prompt's block")


def removed(events):
    return {h for e in events if e["data"]["type"] == "removed" for h in e["data"]["block_hashes"]}


def test_high_priority_prefix_survives_pressure(model):
    keep = KvCacheRetentionConfig(
        token_range_retention_configs=[KvCacheRetentionConfig.TokenRangeRetentionConfig(0, 4, 100, None)],
        decode_retention_priority=35, decode_duration_ms=None)
    cached, events, evicted = run(model, keep)
    assert events[0]["data"]["type"] == "created" and events[0]["data"]["tokens_per_block"] == 4
    h, priority = first_block_hash(events)
    assert priority == 100
    assert evicted > 0 and removed(events), "the pressure evicted nothing: the test proves nothing"
    assert h not in removed(events)
    assert cached >= 4


def test_default_priority_prefix_is_evicted_by_the_same_pressure(model):
    cached, events, evicted = run(model, None)
    h, priority = first_block_hash(events)
    assert priority == 35
    assert h in removed(events)
    assert cached < 4  # at most the BOS token, partially reused from a pressure prompt


def test_lapsed_priority_is_evicted(model):
    # duration_ms: the priority falls back to 35 after it; a 1 ms lapse is over before the pressure.
    lapse = KvCacheRetentionConfig([KvCacheRetentionConfig.TokenRangeRetentionConfig(0, 4, 100, 1)])
    cached, events, _ = run(model, lapse)
    h, _ = first_block_hash(events)
    assert h in removed(events)
    assert cached < 4  # at most the BOS token, partially reused from a pressure prompt


def test_events_need_a_buffer(model):
    with LLM(model, num_threads=1) as llm:
        llm.generate("Once upon a time", SP, use_tqdm=False)
        assert llm.get_kv_cache_events(timeout=0) == []

"""tensorrt_llm.llmapi's names (`from llmrt.llmapi import KvCacheRetentionConfig`): the same
objects as the package's top level."""
from . import (LLM, CapacitySchedulerPolicy, CompletionOutput, ContextChunkingPolicy, KvCacheConfig,
               KvCacheRetentionConfig, Logprob, RequestError, RequestOutput, SamplingParams, SchedulerConfig,
               Tokenizer)

__all__ = [
    "LLM", "Tokenizer", "SamplingParams", "KvCacheConfig", "SchedulerConfig", "CapacitySchedulerPolicy",
    "ContextChunkingPolicy", "KvCacheRetentionConfig", "RequestOutput", "CompletionOutput", "Logprob",
    "RequestError",
]

"""llmrt: an LLM inference engine (C++/CUDA) with TensorRT-LLM's Python LLM API.

    from llmrt import LLM, SamplingParams

    llm = LLM(model="models/llmrt-tiny")
    for output in llm.generate(["Once upon a time"], SamplingParams(max_tokens=32)):
        print(output.outputs[0].text)

The names are tensorrt_llm's (and tensorrt_llm.llmapi's, also importable as llmrt.llmapi), so a
program written for tensorrt_llm runs with only its imports changed. See docs/python.md."""
from ._llmrt import __version__
from ._api import LLM, Tokenizer
from ._config import (CapacitySchedulerPolicy, ContextChunkingPolicy, KvCacheConfig, KvCacheRetentionConfig,
                      SamplingParams, SchedulerConfig)
from ._outputs import CompletionOutput, Logprob, RequestError, RequestOutput

__all__ = [
    "LLM", "Tokenizer", "SamplingParams", "KvCacheConfig", "SchedulerConfig", "CapacitySchedulerPolicy",
    "ContextChunkingPolicy", "KvCacheRetentionConfig", "RequestOutput", "CompletionOutput", "Logprob",
    "RequestError", "__version__",
]

"""Every LLM / KvCacheConfig / SchedulerConfig / SamplingParams field reaches the C++ config,
and a bad value raises with the field named."""
import datetime
import os

import pytest

import llmrt
from llmrt import (LLM, CapacitySchedulerPolicy, ContextChunkingPolicy, KvCacheConfig, KvCacheRetentionConfig,
                   SamplingParams, SchedulerConfig, _llmrt)


def test_public_names():
    import llmrt.llmapi as api
    for name in llmrt.__all__:
        assert getattr(llmrt, name) is not None
    assert api.KvCacheRetentionConfig is llmrt.KvCacheRetentionConfig
    assert api.LLM is llmrt.LLM and api.SamplingParams is llmrt.SamplingParams
    assert llmrt.__version__.count(".") == 2


def test_engine_options_round_trip(model):
    kv = KvCacheConfig(enable_block_reuse=False, max_tokens=2048, max_attention_window=[128, 256],
                       host_cache_size=1 << 20, onboard_blocks=False, secondary_offload_min_priority=50,
                       event_buffer_max_size=100, enable_partial_reuse=False, tokens_per_block=16,
                       dtype="fp8")
    sched = SchedulerConfig(capacity_scheduler_policy=CapacitySchedulerPolicy.MAX_UTILIZATION,
                            context_chunking_policy=ContextChunkingPolicy.EQUAL_PROGRESS)
    with LLM(model, backend="cpu", dtype="float32", max_batch_size=7, max_num_tokens=1000, max_seq_len=256,
             max_input_len=200, num_threads=1, iter_stats_max_iterations=50, overlap="off", quantization="fp8",
             kv_cache_config=kv, scheduler_config=sched, enable_chunked_prefill=False) as llm:
        a = llm.args
    expected = {
        "backend": "cpu", "dtype": "float32", "max_batch_size": "7", "max_num_tokens": "1000",
        "max_seq_len": "256", "max_input_len": "200", "num_threads": "1", "iter_stats_max_iterations": "50",
        "overlap": "off", "quantization": "fp8", "scheduler_config.capacity_scheduler_policy": "max_utilization",
        "scheduler_config.context_chunking_policy": "equal_progress",
        "scheduler_config.enable_chunked_context": "false", "kv_cache_config.enable_block_reuse": "false",
        "kv_cache_config.max_tokens": "2048", "kv_cache_config.max_attention_window": "128,256,128,256,128,256",  # per layer
        "kv_cache_config.host_cache_size": str(1 << 20), "kv_cache_config.onboard_blocks": "false",
        "kv_cache_config.secondary_offload_min_priority": "50", "kv_cache_config.event_buffer_max_size": "100",
        "kv_cache_config.enable_partial_reuse": "false", "kv_cache_config.tokens_per_block": "16",
        "kv_cache_config.dtype": "fp8",
    }
    for key, value in expected.items():
        assert a[key] == value, key


def test_smoothquant_calibrates_at_load_and_is_cached(model, tmp_path):
    # quantization="smoothquant": the calibration settings reach the engine, which writes the
    # calibrated checkpoint once into quantization_cache_dir and loads it from there the next time.
    kwargs = dict(backend="cpu", num_threads=2, quantization="smoothquant", smoothquant_alpha=0.5,
                  calibration_file=os.path.join(model, "calibration.txt"), calibration_size=2,
                  quantization_cache_dir=tmp_path / "cache")
    with LLM(model, **kwargs) as llm:
        a = llm.args
        first = llm.generate("Once upon a time", SamplingParams(max_tokens=6, ignore_eos=True)).outputs[0].token_ids
    assert a["quantization"] == "int8"  # the calibrated checkpoint's own
    entries = os.listdir(tmp_path / "cache")
    assert len(entries) == 1 and entries[0].startswith("smoothquant-")
    stamp = os.path.getmtime(tmp_path / "cache" / entries[0] / "model.safetensors")
    with LLM(model, **kwargs) as llm:
        again = llm.generate("Once upon a time", SamplingParams(max_tokens=6, ignore_eos=True)).outputs[0].token_ids
    assert again == first and len(first) == 6
    assert os.path.getmtime(tmp_path / "cache" / entries[0] / "model.safetensors") == stamp  # not written again


def test_options_the_cpu_engine_does_not_use_still_reach_the_config():
    # free_gpu_memory_fraction and cuda_tuning matter on the GPU only; the C++ config holds them.
    opts = LLM._options("m", "pytorch", "bf16", KvCacheConfig(free_gpu_memory_fraction=0.5),
                        SchedulerConfig(CapacitySchedulerPolicy.STATIC_BATCH),
                        {"cuda_tuning": "graphs=off", "disable_overlap_scheduler": True})
    c = _llmrt.engine_config(opts)
    assert c["kv_cache_config.free_gpu_memory_fraction"] == "0.5"
    assert c["cuda_tuning"] == "graphs=off"
    assert c["backend"] == "auto" and c["dtype"] == "bfloat16" and c["overlap"] == "off"
    assert c["scheduler_config.capacity_scheduler_policy"] == "static_batch"


@pytest.mark.parametrize("kwargs, field", [
    (dict(max_batch_size=0), "max_batch_size"),
    (dict(max_num_tokens=0), "max_num_tokens"),
    (dict(max_seq_len=100000), "max_seq_len"),
    (dict(num_threads=-1), "num_threads"),
    (dict(iter_stats_max_iterations=-1), "iter_stats_max_iterations"),
    (dict(overlap="maybe"), "overlap"),
    (dict(quantization="int4"), "quantization"),
    (dict(quantization="awq", calibration_file=""), "calibration_file"),
    (dict(smoothquant_alpha=2.0), "smoothquant_alpha"),
    (dict(calibration_size=0), "calibration_size"),
    (dict(cuda_tuning="bogus=1"), "cuda_tuning"),
    (dict(backend="tpu"), "backend"),
    (dict(dtype="int3"), "dtype"),
    (dict(tensor_parallel_size=5), "tensor_parallel_size"),
    (dict(pipeline_parallel_size=2), "pipeline_parallel_size"),
    (dict(kv_cache_config=KvCacheConfig(max_tokens=0)), "max_tokens"),
    (dict(kv_cache_config=KvCacheConfig(tokens_per_block=3)), "tokens_per_block"),
    (dict(kv_cache_config=KvCacheConfig(free_gpu_memory_fraction=1.5)), "free_gpu_memory_fraction"),
    (dict(kv_cache_config=KvCacheConfig(host_cache_size=-1)), "host_cache_size"),
    (dict(kv_cache_config=KvCacheConfig(secondary_offload_min_priority=101)), "secondary_offload_min_priority"),
    (dict(kv_cache_config=KvCacheConfig(event_buffer_max_size=-1)), "event_buffer_max_size"),
    (dict(kv_cache_config=KvCacheConfig(max_attention_window=[0])), "max_attention_window"),
    (dict(kv_cache_config=KvCacheConfig(dtype="int3")), "dtype"),
    (dict(kv_cache_config=KvCacheConfig(sink_token_length=4)), "sink_token_length"),
    (dict(scheduler_config=SchedulerConfig("bogus")), "capacity_scheduler_policy"),
    (dict(scheduler_config=SchedulerConfig(context_chunking_policy="sideways")), "context_chunking_policy"),
])
def test_bad_engine_values_name_the_field(model, kwargs, field):
    with pytest.raises(ValueError, match=field):
        LLM(model, **kwargs)


@pytest.mark.parametrize("kwargs, error, field", [
    (dict(max_batch_sise=3), TypeError, "max_batch_size"),
    (dict(max_batch_size="7"), TypeError, "max_batch_size"),
    (dict(kv_cache_config=KvCacheConfig(enable_block_reuse=1)), TypeError, "enable_block_reuse"),
    (dict(kv_cache_config={"max_tokens": 5}), TypeError, "kv_cache_config"),
])
def test_wrong_types_raise_type_error(model, kwargs, error, field):
    with pytest.raises(error, match=field):
        LLM(model, **kwargs)


def test_missing_model_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="config.json|not found|No such"):
        LLM(str(tmp_path / "nothing"))


def test_sampling_params_reach_the_cpp_struct():
    sp = SamplingParams(max_tokens=7, n=2, temperature=0.7, top_k=40, top_p=0.9, min_p=0.05, seed=11,
                        repetition_penalty=1.1, presence_penalty=0.5, frequency_penalty=0.25, min_tokens=3,
                        stop=["\n\n", "The end"], stop_token_ids=[5], end_id=2, include_stop_str_in_output=True,
                        logprobs=3, ignore_eos=True, skip_special_tokens=False, logit_bias={"9": 1.5},
                        bad_token_ids=[17])
    c = _llmrt.sampling_params(sp._cpp_fields())
    assert c["max_tokens"] == 7 and c["n"] == 2 and c["top_k"] == 40 and c["seed"] == 11
    assert c["temperature"] == pytest.approx(0.7) and c["top_p"] == pytest.approx(0.9)
    assert c["min_p"] == pytest.approx(0.05) and c["repetition_penalty"] == pytest.approx(1.1)
    assert c["presence_penalty"] == pytest.approx(0.5) and c["frequency_penalty"] == pytest.approx(0.25)
    assert c["min_tokens"] == 3 and c["logprobs"] == 3 and c["ignore_eos"] is True
    assert c["stop"] == ["\n\n", "The end"] and sorted(c["stop_token_ids"]) == [2, 5]
    assert c["include_stop_str_in_output"] is True and c["skip_special_tokens"] is False
    assert dict(c["logit_bias"]) == {9: 1.5, 17: -100.0}


def test_sampling_defaults_and_aliases():
    c = _llmrt.sampling_params(SamplingParams()._cpp_fields())
    assert c["temperature"] == 0.0 and c["max_tokens"] == 32  # tensorrt_llm's defaults: greedy, 32
    assert SamplingParams(top_p=0.5)._cpp_fields()["temperature"] == 1.0  # sampling once a knob is set
    assert SamplingParams(temperature=0.9, top_k=1)._cpp_fields()["temperature"] == 0.0
    assert SamplingParams(temperature=0.9, top_k=-1)._cpp_fields()["top_k"] == 0  # vLLM's "off"
    assert SamplingParams(random_seed=3) == SamplingParams(seed=3)
    assert SamplingParams(max_new_tokens=9).max_tokens == 9
    assert SamplingParams(stop_words="x").stop == "x"
    with pytest.raises(TypeError, match="both"):
        SamplingParams(seed=1, random_seed=2)


@pytest.mark.parametrize("kwargs, field", [
    (dict(temperature=-1.0), "temperature"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=-5, temperature=1.0), "top_k"),
    (dict(min_p=2.0), "min_p"),
    (dict(max_tokens=-1), "max_tokens"),
    (dict(n=0), "n"),
    (dict(best_of=3, n=2), "best_of"),
    (dict(repetition_penalty=0.0), "repetition_penalty"),
    (dict(presence_penalty=9.0), "presence_penalty"),
    (dict(logprobs=10000), "logprobs"),
    (dict(use_beam_search=True), "use_beam_search"),
    (dict(exclude_input_from_output=False), "exclude_input_from_output"),
    (dict(truncate_prompt_tokens=0), "truncate_prompt_tokens"),
    (dict(bad=["x"]), "bad"),
])
def test_bad_sampling_values_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("kwargs, field", [
    (dict(max_tokens="3"), "max_tokens"),
    (dict(temperature="hot"), "temperature"),
    (dict(ignore_eos=1), "ignore_eos"),
    (dict(stop=[3]), "stop"),
    (dict(tempreature=1.0), "temperature"),
])
def test_wrong_sampling_types_raise_type_error(kwargs, field):
    with pytest.raises(TypeError, match=field):
        SamplingParams(**kwargs)


def test_retention_config_shape_and_checks(llm):
    r = KvCacheRetentionConfig.TokenRangeRetentionConfig(0, 4, 100, None)
    cfg = KvCacheRetentionConfig(token_range_retention_configs=[r], decode_retention_priority=35,
                                 decode_duration_ms=datetime.timedelta(seconds=2))
    assert cfg._cpp() == ([(0, 4, 100, None)], 35, 2000)
    bad = KvCacheRetentionConfig([KvCacheRetentionConfig.TokenRangeRetentionConfig(0, 4, 101, None)])
    with pytest.raises(ValueError, match="priority"):
        llm.generate("Once", SamplingParams(max_tokens=1), kv_cache_retention_config=bad, use_tqdm=False)
    backwards = KvCacheRetentionConfig([KvCacheRetentionConfig.TokenRangeRetentionConfig(8, 4, 50, None)])
    with pytest.raises(ValueError, match="token_end|token_start"):
        llm.generate("Once", SamplingParams(max_tokens=1), kv_cache_retention_config=backwards, use_tqdm=False)
    with pytest.raises(ValueError, match="directory"):
        KvCacheRetentionConfig(directory="/tmp")


def test_type_stubs_match_the_extension():
    import ast
    import pathlib
    stub = pathlib.Path(_llmrt.__file__).with_name("_llmrt.pyi")
    tree = ast.parse(stub.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert callable(getattr(_llmrt, node.name)), node.name
        elif isinstance(node, ast.ClassDef):
            cls = getattr(_llmrt, node.name)
            stubbed = {f.name for f in node.body if isinstance(f, ast.FunctionDef)} - {"__init__"}
            public = {n for n in dir(cls) if not n.startswith("_")}
            assert stubbed == public, (node.name, stubbed ^ public)
    module_public = {n for n in dir(_llmrt) if not n.startswith("_")}
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert module_public == stubbed, module_public ^ stubbed

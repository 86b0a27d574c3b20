"""Shutdown, the with-block, Ctrl-C during generate, the seed's examples, and the installed
package."""
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from llmrt import LLM, SamplingParams

from conftest import PROMPTS, REPO


def run_python(code, env_extra=None, cwd=None, timeout=300):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_shutdown_and_with_block(model):
    llm = LLM(model, num_threads=1)
    h = llm.generate_async(PROMPTS[0], SamplingParams(max_tokens=400, ignore_eos=True))
    llm.shutdown()
    assert h.result().outputs[0].finish_reason == "cancelled"  # unfinished requests end cancelled
    llm.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="shut down"):
        llm.generate(PROMPTS[0], use_tqdm=False)
    with LLM(model, num_threads=1) as inner:
        assert inner.generate(PROMPTS[0], SamplingParams(max_tokens=3), use_tqdm=False).outputs[0].token_ids
    with pytest.raises(RuntimeError, match="shut down"):
        inner.stats()


def test_dropping_the_llm_cancels_its_requests_safely(model):
    llm = LLM(model, num_threads=1)
    h = llm.generate_async(PROMPTS[0], SamplingParams(max_tokens=400, ignore_eos=True))
    del llm  # shuts the engine down, as tensorrt_llm's LLM.__del__; the handle stays valid
    out = h.result()
    assert out.outputs[0].finish_reason == "cancelled" and len(out.outputs[0].token_ids) < 400


@pytest.mark.parametrize("mode", ["generate", "stream"])
def test_ctrl_c_cancels_generate(model, mode):
    # SIGINT to the process during a long generate: KeyboardInterrupt within a fraction of a
    # second, the requests cancelled (the KV cache empty again), and the engine still usable.
    r = run_python(f"""
        import os, signal, threading, time
        from llmrt import LLM, SamplingParams
        llm = LLM({model!r}, num_threads=1)
        long = SamplingParams(max_tokens=480, ignore_eos=True)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        try:
            if {mode!r} == "generate":
                llm.generate(["Once upon a time"] * 8, long, use_tqdm=False)
            else:
                for _ in llm.generate_async("Once upon a time", long, streaming=True):
                    pass
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted after %.2f s" % (time.monotonic() - start))
        s = llm.get_stats()
        out = llm.generate("Once upon a time", SamplingParams(max_tokens=4), use_tqdm=False)
        print("after:", len(out.outputs[0].token_ids), "tokens; generated in all:", llm.stats()["generated_tokens"])
        """)
    assert r.returncode == 0, r.stderr
    m = re.search(r"interrupted after ([0-9.]+) s", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) < 5
    m = re.search(r"after: 4 tokens; generated in all: (\d+)", r.stdout)
    assert m, r.stdout
    assert int(m.group(1)) < 8 * 480  # the long requests stopped early


@pytest.mark.parametrize("example", ["quickstart", "kv_cache_retention"])
def test_seed_examples_print_one_line_per_prompt(model, example):
    r = subprocess.run([sys.executable, str(REPO / "examples" / "python" / f"{example}.py")], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4
    for i, (line, prompt) in enumerate(zip(lines, ["Hello, my name is", "The president of the United States is",
                                                   "The capital of France is", "The future of AI is"])):
        assert line.startswith(f"[{i}] Prompt: {prompt!r}, Generated text: '")
        assert len(line) > len(f"[{i}] Prompt: {prompt!r}, Generated text: ''") + 20


def test_the_seed_programs_differ_from_tensorrt_llm_only_in_imports_and_model():
    # examples/python/*.py are the seed's programs: only `tensorrt_llm` -> `llmrt` and the model path.
    seed = REPO.parent / "shared" / "seeds" / "003_29d6dd75084c1c24.txt"
    if not seed.is_file():
        pytest.skip(f"{seed} is absent")
    seed_lines = {ln.strip() for ln in seed.read_text().splitlines() if ln.strip()}
    for example in ("quickstart", "kv_cache_retention"):
        for ln in (REPO / "examples" / "python" / f"{example}.py").read_text().splitlines():
            s = ln.strip()
            if not s or s.startswith("#"):
                continue
            s = s.replace("'models/llmrt-tiny'", "'TinyLlama/TinyLlama-1.1B-Chat-v1.0'").replace(
                "llmrt", "tensorrt_llm")
            assert s.replace("  #", " #") in seed_lines, s


def test_installed_package_imports_from_the_prefix(model, tmp_path):
    build, subdir = os.environ.get("LLMRT_BUILD_DIR"), os.environ.get("LLMRT_PYTHON_INSTALL_DIR")
    if not build or not subdir:
        pytest.skip("LLMRT_BUILD_DIR / LLMRT_PYTHON_INSTALL_DIR unset (CTest sets them)")
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path), "--component", "python"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    site = tmp_path / subdir
    assert (site / "llmrt" / "__init__.py").is_file() and (site / "llmrt" / "py.typed").is_file()
    assert list((site / "llmrt").glob("_llmrt*.so")) and (site / "llmrt" / "_llmrt.pyi").is_file()
    r = run_python(f"""
        import llmrt
        assert llmrt.__file__.startswith({str(site)!r}), llmrt.__file__
        print(llmrt.LLM({model!r}, num_threads=1).generate("Once", llmrt.SamplingParams(max_tokens=3),
                                                           use_tqdm=False).outputs[0].token_ids)
        """, env_extra={"PYTHONPATH": str(site)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"\[\d+, \d+, \d+\]\n", r.stdout)

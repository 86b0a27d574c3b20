"""Fixtures of the llmrt pytest suite: the bundled model (LLMRT_MODEL, else models/llmrt-tiny of
this checkout) and one shared engine on it. Run by CTest (python_pytest) with PYTHONPATH set to
the build tree's python folder; by hand: PYTHONPATH=build/release/python python3 -m pytest python/tests"""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = os.path.abspath(os.environ.get("LLMRT_MODEL", str(REPO / "models" / "llmrt-tiny")))


@pytest.fixture(scope="session")
def model() -> str:
    if not os.path.isfile(os.path.join(MODEL, "config.json")):
        pytest.skip(f"no model at {MODEL} (set LLMRT_MODEL)")
    return MODEL


@pytest.fixture(scope="session")
def llm(model):
    import llmrt
    with llmrt.LLM(model, num_threads=2) as engine:
        yield engine


PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Lily wanted to",
    "One day, a big",
    "Tom and his mom went to the park",
    "The sun was",
]

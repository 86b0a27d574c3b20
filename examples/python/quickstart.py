# TensorRT-LLM's quick start (examples/pytorch/quickstart.py, as ../shared/seeds/003 quotes it) with
# only `tensorrt_llm` -> `llmrt` in the import and the model path pointing at the bundled model.
# Run from the repository root: PYTHONPATH=build/release/python python3 examples/python/quickstart.py
from llmrt import LLM, SamplingParams


def main():
    prompts = [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    sampling_params = SamplingParams(max_tokens=32)

    llm = LLM(model='models/llmrt-tiny')

    outputs = llm.generate(prompts, sampling_params)

    for i, output in enumerate(outputs):
        prompt = output.prompt
        generated_text = output.outputs[0].text
        print(f"[{i}] Prompt: {prompt!r}, Generated text: {generated_text!r}")


if __name__ == '__main__':
    main()

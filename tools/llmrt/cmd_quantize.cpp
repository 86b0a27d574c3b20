// llmrt quantize --method fp8 --model DIR --output DIR: writes a quantized checkpoint
// (include/llmrt/quantize.h) that llmrt, vLLM and transformers read.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "llmrt/quantize.h"

namespace llmrt::cli {

Command addQuantizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Write a quantized copy of a model directory (fp8: float8 weights, "
                                             "int8: int8 weights; one scale per output row)");
  auto o = std::make_shared<QuantizeOptions>();
  cmd->add_option("--method", o->method, "Quantization method: fp8 or int8 (default fp8)")->type_name("fp8|int8");
  cmd->add_option("--model", o->model, "Source model directory (16 or 32-bit)")->required()->type_name("DIR");
  cmd->add_option("--output", o->output, "New output directory (absent or empty)")->required()->type_name("DIR");
  return {cmd, [=]() -> int {
    auto r = quantizeCheckpoint(*o);
    if (!r.isOk()) return fail(r.status());
    std::printf("%s: %lld matrices quantized to %s, %lld tensors copied; %.1f MB of tensors -> %.1f MB\n",
                o->output.c_str(), static_cast<long long>(r->quantized_tensors), o->method.c_str(),
                static_cast<long long>(r->copied_tensors), static_cast<double>(r->bytes_in) / 1e6,
                static_cast<double>(r->bytes_out) / 1e6);
    return 0;
  }};
}

}  // namespace llmrt::cli

// llmrt quantize --method fp8|int8|smoothquant --model DIR --output DIR: writes a quantized
// checkpoint (include/llmrt/quantize.h) that llmrt, vLLM and transformers read.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "llmrt/quantize.h"

namespace llmrt::cli {

Command addQuantizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Write a quantized copy of a model directory (fp8: float8 weights, "
                                             "int8: int8 weights, smoothquant: int8 after SmoothQuant's "
                                             "calibrated smoothing; one scale per output row; awq: 4-bit "
                                             "AutoAWQ GEMM weights after AWQ's calibrated scale search)");
  auto o = std::make_shared<QuantizeOptions>();
  auto per = std::make_shared<bool>(false);
  cmd->add_option("--method", o->method, "Quantization method: fp8, int8, smoothquant or awq (default fp8)")
      ->type_name("fp8|int8|smoothquant|awq");
  cmd->add_option("--model", o->model, "Source model directory (16 or 32-bit)")->required()->type_name("DIR");
  cmd->add_option("--output", o->output, "New output directory (absent or empty)")->required()->type_name("DIR");
  cmd->add_option("--calib-file", o->calib_file,
                  "smoothquant, awq, --kv-cache-scales: calibration text (default: the bundled model's "
                  "calibration.txt)")
      ->type_name("TEXT");
  cmd->add_option("--calib-size", o->calib_size,
                  "smoothquant, awq, --kv-cache-scales: calibration samples (default 64)")
      ->type_name("N");
  cmd->add_option("--calib-seq-len", o->calib_seq_len,
                  "smoothquant, awq, --kv-cache-scales: tokens per sample (default 512)")
      ->type_name("N");
  cmd->add_option("--alpha", o->alpha, "smoothquant: migration strength in [0, 1] (default 0.8)")->type_name("A");
  cmd->add_option("--group-size", o->awq_group_size, "awq: input features per scale and zero point (default 128)")
      ->type_name("N");
  cmd->add_flag("--awq-clip,!--no-awq-clip", o->awq_clip,
                "awq: AutoAWQ's clipping search on every product matrix but q and k (default on)");
  cmd->add_flag("--per-token,--per-channel", *per,
                "smoothquant: accepted for LMI/TensorRT-LLM compatibility; llmrt always quantizes activations "
                "per token and weights per channel");
  cmd->add_flag("--kv-cache-scales", o->kv_cache_scales,
                "Also write the FP8 KV cache's per-layer k_scale / v_scale (max |K|, |V| over the calibration "
                "text / 448), which --kv-cache-dtype fp8 reads");
  cmd->add_option("--threads", o->num_threads,
                  "smoothquant, awq, --kv-cache-scales: CPU threads for calibration (0 = all cores)")
      ->type_name("N");
  return {cmd, [=]() -> int {
    QuantizeOptions options = *o;
    if ((options.method == "smoothquant" || options.method == "awq" || options.kv_cache_scales) &&
        options.calib_file.empty())
      options.calib_file = defaultModelDir() + "/calibration.txt";
    auto r = quantizeCheckpoint(options);
    if (!r.isOk()) return fail(r.status());
    std::printf("%s: %lld matrices quantized to %s, %lld tensors copied, %lld KV cache scales; %.1f MB of tensors -> "
                "%.1f MB\n",
                o->output.c_str(), static_cast<long long>(r->quantized_tensors),
                o->method == "fp8" ? "fp8" : (o->method == "awq" ? "int4" : "int8"), static_cast<long long>(r->copied_tensors),
                static_cast<long long>(r->kv_cache_scales),
                static_cast<double>(r->bytes_in) / 1e6, static_cast<double>(r->bytes_out) / 1e6);
    return 0;
  }};
}

}  // namespace llmrt::cli

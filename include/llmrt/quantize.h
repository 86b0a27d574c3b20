// Writing quantized checkpoints (`llmrt quantize`): a 16/32-bit HuggingFace model directory in,
// a quantized one out that llmrt, vLLM and transformers (compressed-tensors) read.
#pragma once

#include <cstdint>
#include <string>

#include "llmrt/status.h"

namespace llmrt {

struct QuantizeOptions {
  std::string method = "fp8";  // "fp8", "int8", "smoothquant" or "awq"
  std::string model;           // the source model directory (unquantized)
  std::string output;          // a new directory (absent or empty)
  // smoothquant: calibration text (UTF-8; front ends default to the bundled model's
  // calibration.txt), cut into calib_size samples of calib_seq_len tokens (fewer when the text
  // is shorter), run through the model on the CPU backend with num_threads threads (0: all cores).
  std::string calib_file;
  int64_t calib_size = 64;     // LMI's awq_calib_size / smoothquant calibration samples
  int64_t calib_seq_len = 512;
  double alpha = 0.8;          // migration strength, in [0, 1] (LMI's smoothquant_alpha)
  int64_t awq_group_size = 128;  // awq: input features per scale and zero point
  bool awq_clip = true;          // awq: AutoAWQ's clipping search (its apply_clip)
  // Any method: also calibrate the FP8 KV cache — run the calibration text (as smoothquant) and
  // write each layer's k_scale = max |K| / 448 (K after RoPE) and v_scale = max |V| / 448 as F32
  // scalars "<attention module>.k_scale" / ".v_scale", which `--kv-cache-dtype fp8` reads (and
  // vLLM: fp8 / int8 checkpoints declare a compressed-tensors kv_cache_scheme).
  bool kv_cache_scales = false;
  int num_threads = 0;
};

struct QuantizeReport {
  int64_t quantized_tensors = 0;  // matrices of products written as float8 / int8
  int64_t kv_cache_scales = 0;    // k_scale / v_scale tensors written (kv_cache_scales)
  int64_t copied_tensors = 0;     // everything else, as it was
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor bytes read and written
};

// fp8: every matrix of a product (attention q/k/v/o, MLP and expert matrices; not the
// embeddings, the LM head, norms, biases or MoE routers) becomes float8 E4M3 codes with one
// float32 scale per output row, scale = max|row| / 448, code = round(w / scale) (nearest even);
// written as compressed-tensors "float-quantized" (weights: 8-bit float, strategy "channel";
// input activations dynamic per token), `NAME` F8_E4M3 and `NAME_scale` F32 [rows, 1], in
// model.safetensors. config.json gains the quantization_config; the other files (tokenizer,
// generation config, ...) are copied. Errors: InvalidArgument for an unknown method, an
// already quantized model, GPT-2's Conv1D layout, an output that exists and is not empty;
// the loader's errors for a bad model; Internal for I/O failures (the partial output removed).
// int8: the same matrices as symmetric int8 codes by core/int8.h's rule (scale = max|row| / 127,
// code = round(w * 127 / max|row|), nearest even), written as compressed-tensors "int-quantized"
// (W8A8 INT8 with dynamic per-token activations, as vLLM runs it; llmrt runs INT8 products).
// smoothquant: int8 after SmoothQuant's migration (loader/smoothing.h): the calibration text runs
// through the model, each norm-fed product group gets s_j = a_j^alpha / w_j^(1 - alpha), the norms
// are divided by s (written float32) and the matrices' columns multiplied by s before quantizing.
// awq: AWQ (Lin et al., 2024) as AutoAWQ's GEMM checkpoints hold it (4-bit codes, a zero point and
// an fp16 scale per awq_group_size inputs of a row; loader/awq_pack.h): calibrated as smoothquant
// is, each norm-fed group's column scale s = a^alpha / normalization (a: mean |x| per channel) is
// the alpha of a grid search minimizing the group's output error on the calibration rows after
// quantization, folded into the norm (the other matrices, o and down, are not scaled); then
// (awq_clip) every dense product matrix but the query and key projections gets AutoAWQ's clipping
// search: per row and group, the largest magnitude shrunk by 0-45% in steps of 5%, whichever
// clamp-then-quantize adds the least output error on its own calibration input rows.
// Errors also: InvalidArgument for alpha outside [0, 1], calib_size or calib_seq_len < 1, an
// unreadable or empty calibration text; the model's own load errors.
Result<QuantizeReport> quantizeCheckpoint(const QuantizeOptions& options);

}  // namespace llmrt

"""Model table and HF-code descriptions for make_arch_goldens.py (stdlib only: no torch needed).

Each spec names an HF class, the config it is built with, how its weights are re-initialised, and
`math`: what HF's modeling code for that class does, in words. `math` was written from the installed
transformers' modeling files (make_arch_goldens.py --dump-sources saves them) and is checked
numerically: arch_reference.py implements exactly these words from config.json + model.safetensors
and golden.json records its largest logit difference to HF (checks.reference_reimpl).

Conventions in `math`: H hidden size, hd head dim, nh query heads, nkv key/value heads, I
intermediate size, T tokens, positions 0..T-1. Linear(x) = x @ W^T (+ b) with W stored [out, in];
Conv1D (GPT-2) is x @ W + b with W stored [in, out].
"""

COMMON_NOTE = (
    "Reference: HF transformers on the CPU in float32 (TF32 off, 1 thread), attn_implementation='eager', "
    "weights stored as bf16 and upcast exactly to float32 at load (the saved directory loaded fresh from "
    "disk). Logits are the full-sequence logits of one forward over the prompt (no attention mask, positions "
    "0..T-1). Greedy: a manual loop that runs a full forward over prompt+generated ids at every step (no KV "
    "cache), takes argmax of the last position (ties: lowest id), never stops early, no sampling/penalties. "
    "top1_top2_gaps[i] is the logit gap of step i; min_top1_top2_gap is their minimum. "
    "greedy_new_ids_kv_cache is the same loop run the usual HF way (prompt forward, then one token at a time "
    "with past_key_values).")

COMMON_CFG = dict(vocab_size=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)

LAYERNORM = "LayerNorm: (x - mean) / sqrt(biased var + eps) * w + b"
RMSNORM = "RMSNorm (float32): x / sqrt(mean(x^2) + eps) * w"
ROPE_HALF = ("rotate_half (NeoX style) on the first R dims of each q/k head: x_rot*cos + rotate_half(x_rot)*sin, "
             "rotate_half(x) = cat(-x[R/2:R], x[0:R/2]); cos/sin of pos*inv_freq duplicated as cat(f, f); "
             "inv_freq[i] = theta^(-2i/R), i < R/2; dims R..hd-1 pass through")
ROPE_PAIRS = ("interleaved pairs on the first R dims of each q/k head: pair (2i, 2i+1) rotated by pos*inv_freq[i]: "
              "out[2i] = x[2i]*cos - x[2i+1]*sin, out[2i+1] = x[2i+1]*cos + x[2i]*sin (cos/sin halves "
              "repeat_interleave(2); rotate = stack(-x[1::2], x[0::2]).flatten); inv_freq[i] = theta^(-2i/R), "
              "i < R/2; dims R..hd-1 pass through")
SEQ_PRE = "sequential pre-norm: h = h + attn(norm1(h)); h = h + mlp(norm2(h))"
CAUSAL = "causal mask (query i sees keys 0..i), softmax in float32 over keys"


MODELS = [
    dict(
        name="gpt2_learned_pos", arch="GPT2LMHeadModel", model_type="gpt2", seed=2001, prompt_seed=8001,
        config=dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, n_inner=32, activation_function="gelu_new",
                    tie_word_embeddings=True),
        expect=dict(n_embd=64, n_head=4, n_layer=2, n_positions=128, activation_function="gelu_new",
                    tie_word_embeddings=True),
        tied=True, embed_std=0.25, pos_std=0.5,
        note="GPT-2: Conv1D weights stored [in, out], learned absolute positions, LayerNorm, gelu_new, lm_head "
             "tied to wte.",
        math=dict(
            embedding="h0 = wte[id] + wpe[pos] (learned absolute positions, wpe [n_positions, H]); no scaling",
            block="sequential pre-LN: h = h + attn(ln_1(h)); h = h + mlp(ln_2(h))",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5); ln_1, ln_2, ln_f",
            qkv_layout="attn.c_attn is Conv1D: y = x @ W + b, W [H, 3H] ([in, out], NOT transposed like Linear), "
                       "b [3H]; y = [q | k | v] along the last dim (split(H)); head j = columns j*hd..(j+1)*hd-1 "
                       "of each part",
            attention="nh = n_head, hd = H/nh (16); scores = q.k * hd^-0.5 (scale_attn_weights true, "
                      "scale_attn_by_inverse_layer_idx false); " + CAUSAL + "; attn.c_proj Conv1D [H, H] + bias",
            position="no rotary, no ALiBi",
            mlp="mlp.c_fc Conv1D [H, I] + bias -> gelu_new (tanh approx: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))) "
                "-> mlp.c_proj Conv1D [I, H] + bias (I = n_inner; null would mean 4H)",
            final="ln_f, then logits = h @ wte^T (tied: the file has no lm_head.weight); no bias, no scaling",
            config_keys="n_embd, n_head, n_layer, n_positions, n_inner, activation_function, layer_norm_epsilon, "
                        "scale_attn_weights, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, "
                        "tie_word_embeddings (default true)"),
    ),
    dict(
        name="bigcode_mqa", arch="GPTBigCodeForCausalLM", model_type="gpt_bigcode", seed=2002, prompt_seed=8002,
        config=dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, n_inner=32, multi_query=True,
                    activation_function="gelu_pytorch_tanh", tie_word_embeddings=True),
        expect=dict(n_embd=64, n_head=4, multi_query=True, activation_function="gelu_pytorch_tanh",
                    tie_word_embeddings=True),
        tied=True, embed_std=0.25, pos_std=0.5,
        note="GPTBigCode (SantaCoder/StarCoder): multi-query attention, c_attn = [q | k | v] with one k/v head, "
             "learned positions, LayerNorm, gelu_pytorch_tanh, tied lm_head.",
        math=dict(
            embedding="h0 = wte[id] + wpe[pos] (learned positions); no scaling",
            block="sequential pre-LN: h = h + attn(ln_1(h)); h = h + mlp(ln_2(h))",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5)",
            qkv_layout="attn.c_attn is Linear [H + 2hd, H] + bias (multi_query): rows 0..H-1 = q (nh heads), "
                       "rows H..H+hd-1 = the single k head, rows H+hd..H+2hd-1 = the single v head, shared by "
                       "all q heads (without multi_query the output is viewed [nh, 3*hd] per head, as GPT-NeoX)",
            attention="scores = q.k * hd^-0.5 (scale_attn_weights true; the fp32-softmax unscale options do "
                      "nothing in float32); " + CAUSAL + "; attn.c_proj Linear [H, H] + bias",
            position="no rotary",
            mlp="mlp.c_fc Linear [I, H] + bias -> gelu_pytorch_tanh (tanh approximation) -> mlp.c_proj Linear + bias",
            final="ln_f, logits = h @ wte^T (tied, no lm_head.weight)",
            config_keys="n_embd, n_head, n_layer, n_positions, n_inner, multi_query, activation_function, "
                        "layer_norm_epsilon, scale_attn_weights, attention_softmax_in_fp32, "
                        "scale_attention_softmax_in_fp32"),
    ),
    dict(
        name="gptj_partial_rotary", arch="GPTJForCausalLM", model_type="gptj", seed=2003, prompt_seed=8003,
        config=dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128, n_inner=32,
                    activation_function="gelu_new", tie_word_embeddings=False),
        expect=dict(n_embd=64, n_head=4, rotary_dim=8, activation_function="gelu_new", tie_word_embeddings=False),
        tied=False, embed_std=0.7, lm_bias_std=0.5, rotary=dict(dim=8, style="interleaved", theta=10000.0),
        note="GPT-J: parallel attention+MLP from one LayerNorm, rotary on 8 of 16 head dims in interleaved pairs, "
             "lm_head with a non-zero bias.",
        math=dict(
            embedding="h0 = wte[id]; no positions table, no scaling",
            block="parallel, ONE norm: r = ln_1(h); h = h + attn(r) + mlp(r)",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5); ln_1 per layer, ln_f",
            qkv_layout="separate attn.q_proj, k_proj, v_proj Linear [H, H], no bias; heads contiguous (head j = "
                       "rows j*hd..); attn.out_proj Linear [H, H], no bias",
            attention="nh = n_head, hd = 16; rotary on q and k; scores = q.k / sqrt(hd) (the full head dim, not "
                      "rotary_dim); " + CAUSAL,
            rotary="R = rotary_dim (8) of hd 16; theta fixed at 10000 in the code (no config key); " + ROPE_PAIRS +
                   " (GPT-J's rotate_every_two, sin/cos table embed_positions = cat(sin, cos) [n_positions, R])",
            mlp="mlp.fc_in Linear [I, H] + bias -> gelu_new -> mlp.fc_out Linear [H, I] + bias",
            final="ln_f, logits = lm_head(h) = h @ W^T + b with lm_head.bias [V] (untied)",
            config_keys="n_embd, n_head, n_layer, rotary_dim (default 64), n_positions, n_inner (null = 4H), "
                        "activation_function, layer_norm_epsilon, tie_word_embeddings"),
    ),
    dict(
        name="neox_parallel_partial", arch="GPTNeoXForCausalLM", model_type="gpt_neox", seed=2004, prompt_seed=8004,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                    rotary_pct=0.5, partial_rotary_factor=0.5, use_parallel_residual=True,
                    max_position_embeddings=128, hidden_act="gelu", tie_word_embeddings=False),
        expect=dict(hidden_size=64, use_parallel_residual=True, hidden_act="gelu", tie_word_embeddings=False),
        tied=False, embed_std=0.7, rotary=dict(dim=8, style="rotate_half", theta=10000.0),
        note="GPT-NeoX: per-head packed query_key_value, rotary on the first half of each head, parallel residual "
             "with two LayerNorms, exact gelu, untied embed_out.",
        math=dict(
            embedding="h0 = gpt_neox.embed_in[id]; no scaling, no positions table",
            block="use_parallel_residual true: h = h + attn(input_layernorm(h)) + mlp(post_attention_layernorm(h)) "
                  "(both norms read the same block input)",
            norm=LAYERNORM + ", eps = layer_norm_eps (1e-5)",
            qkv_layout="attention.query_key_value Linear [3H, H] + bias [3H]; output viewed [nh, 3*hd]: for head "
                       "j, rows j*3hd..j*3hd+hd-1 = q_j, next hd = k_j, next hd = v_j (per-head interleaved, NOT "
                       "[Q|K|V])",
            attention="scores = q.k * hd^-0.5; " + CAUSAL + "; attention.dense Linear [H, H] + bias",
            rotary="R = int(hd * partial_rotary_factor) = 8 (config.json: partial_rotary_factor, top level and in "
                   "rope_parameters; older configs: rotary_pct); theta = rope_parameters.rope_theta "
                   "(older: rotary_emb_base); " + ROPE_HALF,
            mlp="mlp.dense_h_to_4h Linear [I, H] + bias -> gelu (exact erf) -> mlp.dense_4h_to_h Linear + bias",
            final="gpt_neox.final_layer_norm, logits = embed_out(h) (Linear [V, H], no bias, untied)",
            config_keys="hidden_size, num_attention_heads, num_hidden_layers, intermediate_size, hidden_act, "
                        "layer_norm_eps, use_parallel_residual (default true), rope_parameters.partial_rotary_factor "
                        "(5.17 reads it from rope_parameters; a legacy top-level rotary_pct is moved there; default "
                        "0.25 when neither is present), rope_parameters.rope_theta (legacy rotary_emb_base, default "
                        "10000), attention_bias (default true), tie_word_embeddings"),
    ),
    dict(
        name="neox_sequential", arch="GPTNeoXForCausalLM", model_type="gpt_neox", seed=2005, prompt_seed=8005,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                    rotary_pct=1.0, partial_rotary_factor=1.0, use_parallel_residual=False,
                    max_position_embeddings=128, hidden_act="gelu", tie_word_embeddings=False),
        expect=dict(hidden_size=64, use_parallel_residual=False, tie_word_embeddings=False),
        tied=False, embed_std=0.7, rotary=dict(dim=16, style="rotate_half", theta=10000.0),
        note="GPT-NeoX with use_parallel_residual false and rotary on the whole head.",
        math=dict(
            embedding="h0 = gpt_neox.embed_in[id]",
            block="use_parallel_residual false: h = h + attn(input_layernorm(h)); h = h + mlp(post_attention_layernorm(h))",
            norm=LAYERNORM + ", eps = layer_norm_eps (1e-5)",
            qkv_layout="as neox_parallel_partial: query_key_value [3H, H] + bias viewed [nh, 3*hd] per head (q_j, k_j, v_j)",
            attention="scores = q.k * hd^-0.5; " + CAUSAL + "; attention.dense + bias",
            rotary="R = hd = 16 (partial_rotary_factor 1.0); " + ROPE_HALF,
            mlp="dense_h_to_4h + bias -> gelu (exact) -> dense_4h_to_h + bias",
            final="final_layer_norm, embed_out (untied)",
            config_keys="as neox_parallel_partial"),
    ),
    dict(
        name="falcon_mqa_parallel", arch="FalconForCausalLM", model_type="falcon", seed=2006, prompt_seed=8006,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=True, parallel_attn=True,
                    new_decoder_architecture=False, bias=False, alibi=False, ffn_hidden_size=32,
                    max_position_embeddings=128, tie_word_embeddings=True),
        expect=dict(multi_query=True, parallel_attn=True, new_decoder_architecture=False, bias=False, alibi=False,
                    tie_word_embeddings=True),
        tied=True, embed_std=0.25, rotary=dict(dim=16, style="rotate_half", theta=10000.0),
        note="Falcon-7B style: multi-query fused query_key_value, parallel attention+MLP from one LayerNorm, "
             "no biases, rotary, tied lm_head.",
        math=dict(
            embedding="h0 = transformer.word_embeddings[id]",
            block="parallel_attn true, new_decoder_architecture false: ONE norm: r = input_layernorm(h); "
                  "h = h + attn(r) + mlp(r) (no post_attention_layernorm in the file)",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5)",
            qkv_layout="self_attention.query_key_value Linear [(nh+2)*hd, H] (bias false) viewed [nh+2, hd]: rows "
                       "0..nh*hd-1 = q heads, next hd = the single k head, last hd = the single v head (multi_query)",
            attention="rotary on q, k; scores = q.k / sqrt(hd); " + CAUSAL + "; self_attention.dense Linear [H, H]",
            rotary="R = hd (full); theta = rope_parameters.rope_theta; " + ROPE_HALF,
            mlp="mlp.dense_h_to_4h Linear [ffn_hidden_size, H] -> gelu (exact; config 'activation') -> "
                "mlp.dense_4h_to_h; biases only if config.bias",
            final="transformer.ln_f, logits = h @ word_embeddings^T (tied, no lm_head.weight)",
            config_keys="hidden_size, num_attention_heads, num_hidden_layers, multi_query, num_kv_heads, "
                        "parallel_attn, new_decoder_architecture, num_ln_in_parallel_attn, bias, alibi, "
                        "ffn_hidden_size (null = 4H), activation (default gelu), layer_norm_epsilon, "
                        "rope_parameters.rope_theta, tie_word_embeddings (default true). KV heads: num_kv_heads if "
                        "new_decoder_architecture, else 1 if multi_query, else nh. num_ln_in_parallel_attn null "
                        "means 2 for the new decoder"),
    ),
    dict(
        name="falcon_new_decoder", arch="FalconForCausalLM", model_type="falcon", seed=2007, prompt_seed=8007,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
                    new_decoder_architecture=True, num_ln_in_parallel_attn=2, parallel_attn=True, bias=False,
                    alibi=False, ffn_hidden_size=32, max_position_embeddings=128, tie_word_embeddings=True),
        expect=dict(new_decoder_architecture=True, num_kv_heads=2, parallel_attn=True, tie_word_embeddings=True),
        tied=True, embed_std=0.25, rotary=dict(dim=16, style="rotate_half", theta=10000.0),
        note="Falcon-40B/180B style new decoder: grouped query_key_value (2 kv groups of 2 q heads), ln_attn and "
             "ln_mlp, parallel attention+MLP, tied lm_head.",
        math=dict(
            embedding="h0 = transformer.word_embeddings[id]",
            block="new_decoder_architecture, num_ln_in_parallel_attn 2: h = h + attn(ln_attn(h)) + mlp(ln_mlp(h)) "
                  "(with num_ln_in_parallel_attn 1 both branches would read ln_attn(h))",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5)",
            qkv_layout="query_key_value Linear [(nh + 2*nkv)*hd, H] viewed [nkv, nh/nkv + 2, hd]: for kv group g "
                       "(rows g*(nh/nkv+2)*hd ..): its nh/nkv q heads, then k_g, then v_g; q head j = group "
                       "j/(nh/nkv), slot j%(nh/nkv). nkv = num_kv_heads (multi_query is ignored here)",
            attention="rotary on q, k; scores = q.k / sqrt(hd); " + CAUSAL + "; dense Linear, no bias",
            rotary="R = hd; " + ROPE_HALF,
            mlp="dense_h_to_4h -> gelu (exact) -> dense_4h_to_h, no biases",
            final="ln_f, tied to word_embeddings",
            config_keys="as falcon_mqa_parallel; num_kv_heads, num_ln_in_parallel_attn"),
    ),
    dict(
        name="phi3_packed", arch="Phi3ForCausalLM", model_type="phi3", seed=2008, prompt_seed=8008,
        config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=128, original_max_position_embeddings=128,
                    sliding_window=None, tie_word_embeddings=False),
        expect=dict(num_key_value_heads=2, sliding_window=None, tie_word_embeddings=False),
        tied=False, embed_std=0.7, rotary=dict(dim=16, style="rotate_half", theta=10000.0),
        note="Phi-3: packed qkv_proj ([Q|K|V], GQA 4/2) and gate_up_proj, RMSNorm, no rope scaling, no window.",
        math=dict(
            embedding="h0 = model.embed_tokens[id]; no scaling",
            block=SEQ_PRE + " with norm1 = input_layernorm, norm2 = post_attention_layernorm",
            norm=RMSNORM + ", eps = rms_norm_eps (1e-5)",
            qkv_layout="self_attn.qkv_proj Linear [(nh + 2*nkv)*hd, H], no bias: rows [0, nh*hd) = q, next "
                       "nkv*hd = k, last nkv*hd = v (contiguous [Q|K|V]); GQA: q head j uses kv head j/(nh/nkv)",
            attention="scores = q.k * hd^-0.5; " + CAUSAL + "; o_proj Linear, no bias",
            rotary="R = hd (partial_rotary_factor 1.0); theta = rope_parameters.rope_theta; " + ROPE_HALF,
            mlp="mlp.gate_up_proj Linear [2I, H]: first I output rows = gate, last I = up (chunk(2)); "
                "mlp.down_proj(up * silu(gate))",
            final="model.norm, lm_head (untied, no bias)",
            config_keys="hidden_size, num_attention_heads, num_key_value_heads, intermediate_size, rms_norm_eps, "
                        "rope_parameters (rope_theta, partial_rotary_factor default 1.0), sliding_window, hidden_act"),
    ),
    dict(
        name="gemma2_softcap_sliding", arch="Gemma2ForCausalLM", model_type="gemma2", seed=2009, prompt_seed=8009,
        config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, sliding_window=8, query_pre_attn_scalar=24,
                    attn_logit_softcapping=5.0, final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh",
                    max_position_embeddings=128, tie_word_embeddings=True),
        expect=dict(head_dim=16, sliding_window=8, query_pre_attn_scalar=24, attn_logit_softcapping=5.0,
                    final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
        tied=True, embed_std=0.06, norm_offset=0.0, norm_offsets={"post_attention_layernorm": 1.0,
                                                                 "post_feedforward_layernorm": 1.0},
        gain_overrides={"q_proj": 2.0, "k_proj": 2.0},
        rotary=dict(dim=16, style="rotate_half", theta=10000.0), check_gemma2=True,
        note="Gemma-2: sqrt(H) embedding scale, (1+w) RMSNorms around both branches, query_pre_attn_scalar 24, "
             "attention soft-cap 5 and final soft-cap 3, sliding window 8 on layer 0, full attention on layer 1. "
             "Init: stored norm weights 0.1*randn (effective 1+w) except post_attention/post_feedforward norms "
             "1+0.1*randn (effective ~2), embeddings std 0.06 (x8 = 0.48 in the residual stream), q/k gain 2: keeps the tied embedding from making "
             "every greedy step repeat its input, the final cap nonlinear and the attention scores big enough for "
             "the attention cap to bend them.",
        math=dict(
            embedding="h0 = embed_tokens[id] * sqrt(H): Gemma2TextScaledWordEmbedding multiplies by the buffer "
                      "embed_scale = H**0.5 cast to the weight dtype (8.0 here, exact)",
            block="sandwich norms: h = h + post_attention_layernorm(attn(input_layernorm(h))); "
                  "h = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))",
            norm="Gemma RMSNorm (float32): x / sqrt(mean(x^2) + eps) * (1 + w) — stored weights are offsets from "
                 "1; eps = rms_norm_eps (1e-6); also model.norm",
            qkv_layout="separate q_proj [nh*hd, H], k_proj/v_proj [nkv*hd, H], o_proj [H, nh*hd], no bias; GQA: q "
                       "head j uses kv head j/(nh/nkv)",
            attention="rotary on q, k; scores = q.k * query_pre_attn_scalar^-0.5 (24^-0.5, NOT hd^-0.5); then "
                      "soft-cap scores = tanh(scores / attn_logit_softcapping) * attn_logit_softcapping, applied "
                      "BEFORE the mask; then causal (+ sliding on sliding layers) mask, softmax in float32",
            sliding="config.json layer_types: layer i is 'sliding_attention' for even i, 'full_attention' for odd "
                    "i; on sliding layers query q sees keys max(0, q-w+1)..q (w = sliding_window = 8 keys including "
                    "itself; see sliding_window_effective, measured)",
            rotary="R = hd; theta = rope_parameters.rope_theta; " + ROPE_HALF,
            mlp="down_proj(gelu_pytorch_tanh(gate_proj(x)) * up_proj(x)); config key hidden_activation",
            final="model.norm (1+w), logits = h @ embed_tokens^T (tied), then logits = tanh(logits / "
                  "final_logit_softcapping) * final_logit_softcapping",
            config_keys="hidden_size, head_dim, num_attention_heads, num_key_value_heads, intermediate_size, "
                        "rms_norm_eps, query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping, "
                        "sliding_window (default 4096), layer_types (default: sliding for even layer index, i.e. "
                        "(i+1) % 2 == 1), hidden_activation, rope_parameters.rope_theta; defaults "
                        "query_pre_attn_scalar 256, attn_logit_softcapping 50, final_logit_softcapping 30, tied"),
    ),
    dict(
        name="glm_partial_interleaved", arch="GlmForCausalLM", model_type="glm", seed=2010, prompt_seed=8010,
        config=dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5, attention_bias=True,
                    rms_norm_eps=1e-5, max_position_embeddings=128, tie_word_embeddings=True),
        expect=dict(head_dim=16, num_key_value_heads=2, attention_bias=True, tie_word_embeddings=True),
        tied=True, embed_std=0.25, rotary=dict(dim=8, style="interleaved", theta=10000.0),
        note="GLM (GLM-4 family, HF-native GlmForCausalLM): rotary on half of each head in interleaved pairs, "
             "q/k/v biases, packed gate_up_proj, GQA 4/2; tied embeddings (real GLM-4 checkpoints are untied: "
             "lm_head.weight) to keep all fixtures within 3 MB.",
        math=dict(
            embedding="h0 = model.embed_tokens[id]",
            block=SEQ_PRE + " (input_layernorm, post_attention_layernorm)",
            norm=RMSNORM + ", eps = rms_norm_eps (1e-5)",
            qkv_layout="separate q_proj [nh*hd, H] + bias, k_proj/v_proj [nkv*hd, H] + bias (attention_bias), "
                       "o_proj [H, nh*hd] no bias",
            attention="scores = q.k * hd^-0.5; " + CAUSAL,
            rotary="R = int(hd * partial_rotary_factor) = 8 of hd 16; theta = rope_parameters.rope_theta; " + ROPE_PAIRS,
            mlp="mlp.gate_up_proj Linear [2I, H]: first I rows = gate, last I = up; down_proj(up * silu(gate))",
            final="model.norm, logits = h @ embed_tokens^T (tied here; untied checkpoints have lm_head.weight)",
            config_keys="hidden_size, head_dim, num_attention_heads, num_key_value_heads, "
                        "rope_parameters.partial_rotary_factor (default 0.5 for GLM), attention_bias (default true), "
                        "rms_norm_eps, rope_parameters.rope_theta, hidden_act"),
    ),
    dict(
        name="mixtral_moe", arch="MixtralForCausalLM", model_type="mixtral", seed=2011, prompt_seed=8011,
        config=dict(hidden_size=64, intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
                    sliding_window=None, tie_word_embeddings=True),
        expect=dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=16, sliding_window=None,
                    tie_word_embeddings=True),
        tied=True, embed_std=0.25, router_gain=2.0, rotary=dict(dim=16, style="rotate_half", theta=None),
        note="Mixtral: 4 experts, top-2 of the softmax, renormalized; expert intermediate 16 and tied embeddings keep "
             "all fixtures within 3 MB.",
        math=dict(
            embedding="h0 = model.embed_tokens[id]",
            block=SEQ_PRE + " with the MLP replaced by the sparse MoE block",
            norm=RMSNORM + ", eps = rms_norm_eps (1e-5)",
            qkv_layout="separate q/k/v/o_proj, no bias; GQA 4/2",
            attention="scores = q.k * hd^-0.5; " + CAUSAL + "; no window (sliding_window null)",
            rotary="R = hd; theta = rope_parameters.rope_theta (1e6 default); " + ROPE_HALF,
            moe="router logits = gate(x) (Linear [E, H], no bias); p = softmax(logits) over ALL E experts "
                "(float32); take the top-k (k = num_experts_per_tok = 2) of p; renormalize them to sum 1 "
                "(w_j = p_j / sum of the k); out = sum_j w_j * expert_j(x); expert(x) = w2(silu(w1 x) * w3 x)",
            tensors_moe="on disk per expert (legacy names, 5.x converts to fused tensors at load): "
                        "model.layers.N.block_sparse_moe.experts.E.w1.weight [I, H] (gate), .w3.weight [I, H] (up), "
                        ".w2.weight [H, I] (down); model.layers.N.block_sparse_moe.gate.weight [E, H]",
            final="model.norm, logits = h @ embed_tokens^T (tied here)",
            config_keys="num_local_experts, num_experts_per_tok, intermediate_size, router_jitter_noise (training "
                        "only), sliding_window, rms_norm_eps, rope_parameters"),
    ),
    dict(
        name="qwen2moe_shared", arch="Qwen2MoeForCausalLM", model_type="qwen2_moe", seed=2012, prompt_seed=8012,
        config=dict(hidden_size=64, intermediate_size=64, moe_intermediate_size=32,
                    shared_expert_intermediate_size=64, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                    decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=128, use_sliding_window=False,
                    tie_word_embeddings=True),
        expect=dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                    shared_expert_intermediate_size=64, norm_topk_prob=False, decoder_sparse_step=1,
                    mlp_only_layers=[], tie_word_embeddings=True),
        tied=True, embed_std=0.25, router_gain=2.0, rotary=dict(dim=16, style="rotate_half", theta=None),
        note="Qwen2-MoE: 4 experts top-2 NOT renormalized (norm_topk_prob false), shared expert with a sigmoid "
             "gate, q/k/v biases; tied embeddings keep the checkpoint under 250 KB.",
        math=dict(
            embedding="h0 = model.embed_tokens[id]",
            block=SEQ_PRE + " with the MLP replaced by the MoE block on every layer (decoder_sparse_step 1, "
                  "mlp_only_layers []; a layer l is sparse iff l not in mlp_only_layers and (l+1) % "
                  "decoder_sparse_step == 0, else a dense mlp with intermediate_size)",
            norm=RMSNORM + ", eps = rms_norm_eps (1e-6)",
            qkv_layout="separate q/k/v_proj with bias (config qkv_bias), o_proj no bias; GQA 4/2",
            attention="scores = q.k * hd^-0.5; " + CAUSAL + "; no window (use_sliding_window false)",
            rotary="R = hd; " + ROPE_HALF,
            moe="p = softmax(mlp.gate(x)) over ALL E experts (float32); top-k (k = 2) of p; norm_topk_prob false "
                "-> the k weights are the raw softmax probabilities (sum < 1, NOT renormalized); routed = sum_j "
                "p_j * expert_j(x), expert(x) = down_proj(silu(gate_proj x) * up_proj x) with "
                "moe_intermediate_size; shared = sigmoid(shared_expert_gate(x)) * shared_expert(x) "
                "(shared_expert_gate Linear [1, H], a scalar per token; shared_expert = same gated MLP with "
                "shared_expert_intermediate_size); out = routed + shared",
            tensors_moe="model.layers.N.mlp.gate.weight [E, H]; mlp.experts.E.{gate_proj,up_proj} [I_moe, H], "
                        "down_proj [H, I_moe]; mlp.shared_expert.{gate_proj,up_proj} [I_sh, H], down_proj "
                        "[H, I_sh]; mlp.shared_expert_gate.weight [1, H]",
            final="model.norm, logits = h @ embed_tokens^T (tied here)",
            config_keys="num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size, "
                        "norm_topk_prob, decoder_sparse_step, mlp_only_layers, qkv_bias, use_sliding_window, "
                        "rms_norm_eps, rope_parameters"),
    ),
    dict(
        name="falcon_alibi", arch="FalconForCausalLM", model_type="falcon", seed=2013, prompt_seed=8013,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=False, parallel_attn=True,
                    new_decoder_architecture=False, bias=True, alibi=True, ffn_hidden_size=32,
                    max_position_embeddings=128, tie_word_embeddings=True),
        expect=dict(alibi=True, multi_query=False, parallel_attn=True, new_decoder_architecture=False, bias=True,
                    tie_word_embeddings=True),
        tied=True, embed_std=0.2, gain=1.6, alibi=True, attn_implementation="sdpa",
        note="Falcon with ALiBi (no rotary): per-head query_key_value, parallel attention+MLP, biases, tied head "
             "(embeddings std 0.2 and gain 1.6: with larger tied embeddings greedy locks onto repeating its input). "
             "The reference runs HF with attn_implementation='sdpa', not 'eager': HF's eager Falcon path adds the "
             "ALiBi bias twice (once as (q.k + alibi)/sqrt(hd) in FalconAttention, once more through the causal "
             "mask that FalconModel._update_causal_mask builds as alibi/sqrt(hd)), so eager computes "
             "q.k/sqrt(hd) + 2*slope*j/sqrt(hd). The sdpa path (HF's default) and the original Falcon-RW code "
             "add it once: q.k/sqrt(hd) + slope*j/sqrt(hd). checks.logits_max_abs_diff_eager_vs_sdpa_longest_prompt "
             "records the difference.",
        math=dict(
            embedding="h0 = transformer.word_embeddings[id]",
            block="parallel_attn true: r = input_layernorm(h); h = h + attn(r) + mlp(r)",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5)",
            qkv_layout="query_key_value Linear [3H, H] + bias, viewed [nh, 3, hd]: for head j rows j*3hd.. = q_j, "
                       "then k_j, then v_j (multi_query false)",
            attention="no rotary; scores = (q.k + slope_h * j) / sqrt(hd): the ALiBi term is scaled by 1/sqrt(hd) "
                      "with the dot product (effective slope slope_h/sqrt(hd)) — HF sdpa path and original Falcon-RW "
                      "(HF's eager path double-counts it, see note); " + CAUSAL + "; dense Linear + bias",
            alibi="bias for head h and key position j (0-based, from cumsum of the attention mask) = slope_h * j "
                  "(constant along a query row, so the same as slope_h * (j - i) after softmax); slopes for nh a "
                  "power of two: slope_h = 2^(-8(h+1)/nh) (nh 4: 0.25, 0.0625, 0.015625, 0.00390625); otherwise "
                  "the closest power of two c gives 2^(-8(h+1)/c) for h < c plus 2^(-4(2i+1)/c) for the rest. "
                  "Falcon's build_alibi_tensor computes slopes.bfloat16() * j, i.e. the slope AND the product "
                  "slope*j are rounded to bf16 before the cast to float32 (exact here: power-of-two slopes, "
                  "j < 256; not exact for e.g. 32 heads or positions >= 256). BLOOM keeps them in float32",
            mlp="dense_h_to_4h + bias -> gelu (exact) -> dense_4h_to_h + bias",
            final="ln_f, tied to word_embeddings",
            config_keys="alibi, multi_query, parallel_attn, bias, ... (as falcon_mqa_parallel)"),
    ),
    dict(
        name="bloom_alibi", arch="BloomForCausalLM", model_type="bloom", seed=2014, prompt_seed=8014,
        optional=True,
        config=dict(hidden_size=64, n_layer=2, n_head=4, tie_word_embeddings=True),
        expect=dict(hidden_size=64, n_head=4, n_layer=2, tie_word_embeddings=True),
        tied=True, embed_std=0.5, gain=2.5, alibi=True,
        note="BLOOM: embedding LayerNorm, per-head query_key_value, ALiBi added after the 1/sqrt(hd) scaling, "
             "4H MLP with bloom's tanh gelu, tied head. Gain 2.5: the embedding LayerNorm makes the token's own "
             "embedding large in the residual stream, which otherwise makes greedy repeat its input.",
        math=dict(
            embedding="h0 = word_embeddings_layernorm(transformer.word_embeddings[id]) (LayerNorm with bias)",
            block="r = input_layernorm(h); a = h + dense(attn(r)); h = a + mlp(post_attention_layernorm(a)) "
                  "(apply_residual_connection_post_layernorm false: residuals are the un-normed inputs)",
            norm=LAYERNORM + ", eps = layer_norm_epsilon (1e-5)",
            qkv_layout="self_attention.query_key_value Linear [3H, H] + bias viewed [nh, 3, hd] (q_j, k_j, v_j per head)",
            attention="scores = slope_h * j + (q.k) / sqrt(hd) (baddbmm beta=1, alpha=1/sqrt(hd)): ALiBi NOT "
                      "scaled — unlike Falcon; " + CAUSAL + "; dense Linear + bias",
            alibi="slope_h * j with the falcon_alibi slopes, computed in float32 (no bf16 rounding, unlike Falcon)",
            mlp="dense_h_to_4h Linear [4H, H] + bias -> bloom gelu (x*0.5*(1+tanh(0.79788456*x*(1+0.044715x^2)))) "
                "-> dense_4h_to_h + bias; 4H is fixed (no intermediate size key)",
            final="ln_f, logits = h @ word_embeddings^T (tied)",
            config_keys="hidden_size (n_embed), n_head, n_layer, layer_norm_epsilon, "
                        "apply_residual_connection_post_layernorm"),
    ),
]

SPEC_BY_NAME = {s["name"]: s for s in MODELS}


def math_entry(spec):
    """The static `math.hf_code` object written into golden.json."""
    return dict(spec["math"])


# Where transformers 5.17.0 does it (file:line in transformers/models/<type>/), for the math document
# (make_arch_goldens.py --math-doc). Read from the installed files saved with --dump-sources.
SOURCE_LINES = {
    "gpt2_learned_pos": [
        "modeling_gpt2.py:98 `self.scaling = self.head_dim**-0.5` (÷ (layer_idx+1) only with scale_attn_by_inverse_layer_idx)",
        "modeling_gpt2.py:185 `self.c_attn(hidden_states).split(self.split_size, dim=2)` — q | k | v of H each",
        "modeling_gpt2.py:576-577 `position_embeds = self.wpe(position_ids)`; `inputs_embeds + position_embeds`",
        "modeling_gpt2.py:273-307 pre-LN block: ln_1 -> attn -> residual add; ln_2 -> mlp -> residual add",
        "pytorch_utils.py Conv1D: `torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)`, weight [nx=in, nf=out]",
    ],
    "bigcode_mqa": [
        "modeling_gpt_bigcode.py:141 `self.scaling = self.head_dim**-0.5 if config.scale_attn_weights else 1.0`",
        "modeling_gpt_bigcode.py:205 `c_attn(hidden_states).unsqueeze(1).split((self.embed_dim, self.kv_dim, self.kv_dim), dim=3)`",
        "modeling_gpt_bigcode.py:210-213 (not multi_query) `.view(..., self.num_heads, 3 * self.head_dim)...split(3 * [self.head_dim])`",
    ],
    "gptj_partial_rotary": [
        "modeling_gptj.py:57 `rotate_every_two`: stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)",
        "modeling_gptj.py:64-67 sin/cos `repeat_interleave(..., 2, 3)`; `tensor * cos + rotate_every_two(tensor) * sin`",
        "modeling_gptj.py:96 `self.scale_attn = math.sqrt(self.head_dim)`; :148 `attn_weights / self.scale_attn` (q, k in float32)",
        "modeling_gptj.py:104 `embed_positions` buffer = create_sinusoidal_positions(max_positions, rotary_dim)",
        "modeling_gptj.py:197 `k_rot = key[:, :, :, : self.rotary_dim]` (first rotary_dim dims of each head)",
        "modeling_gptj.py:410-411 `hidden_states = attn_outputs + feed_forward_hidden_states + residual` (both from ln_1)",
    ],
    "neox_parallel_partial": [
        "modeling_gpt_neox.py:187 `self.rotary_ndims = int(self.head_size * partial_rotary_factor)` (from rope_parameters)",
        "modeling_gpt_neox.py:204-207 `view(*input_shape, -1, 3 * self.head_size)` then `qkv.chunk(3, dim=-1)` per head",
        "modeling_gpt_neox.py:271-274 parallel: `mlp_output + attn_output + hidden_states`",
        "configuration_gpt_neox.py:97-98 rotary_emb_base -> rope_theta, rotary_pct -> partial_rotary_factor (default 0.25)",
    ],
    "neox_sequential": [
        "modeling_gpt_neox.py:271-280 `use_parallel_residual` false: attn_output + hidden_states, then post_attention_layernorm -> mlp",
    ],
    "falcon_mqa_parallel": [
        "modeling_falcon.py:254-283 `_split_heads`: new decoder view(.., -1, nh/nkv + 2, hd); MHA view(.., nh, 3, hd); "
        "multi_query view(.., nh + 2, hd)",
        "modeling_falcon.py:560-571 norms: not parallel -> input_layernorm + post_attention_layernorm; parallel with "
        "num_ln_in_parallel_attn 2 -> ln_attn + ln_mlp; else input_layernorm only",
        "modeling_falcon.py:627 `mlp_output += attention_output` (parallel / new decoder), then + residual",
    ],
    "falcon_new_decoder": [
        "modeling_falcon.py:267-273 `fused_qkv.view(batch, seq_len, -1, self.num_heads // self.num_kv_heads + 2, "
        "self.head_dim)`; query = [..., :-2], key = [..., [-2]], value = [..., [-1]]",
        "modeling_falcon.py:589-591 `ln_attn(hidden_states)`, `ln_mlp(hidden_states)`",
    ],
    "falcon_alibi": [
        "modeling_falcon.py:187 `alibi = slopes[..., None].bfloat16() * arange_tensor` (bf16 slopes and product)",
        "modeling_falcon.py:405-406 eager: `attention_scores + alibi.view(...)`; `attention_logits *= self.inv_norm_factor`",
        "modeling_falcon.py:783 `_update_causal_mask`: mask = `alibi / math.sqrt(head_dim)` where allowed, min where "
        "masked — the eager path adds it again (double ALiBi); the sdpa path uses only this mask",
        "modeling_falcon.py:278 MHA qkv `view(batch_size, seq_length, self.num_heads, 3, self.head_dim)`",
    ],
    "phi3_packed": [
        "modeling_phi3.py:230-233 `query_pos = num_attention_heads * head_dim`; q = qkv[..., :query_pos], k next "
        "nkv*hd, v the rest",
        "modeling_phi3.py:61-62 `gate, up_states = up_states.chunk(2, dim=-1)`; `up_states * self.activation_fn(gate)`",
    ],
    "gemma2_softcap_sliding": [
        "modeling_gemma2.py:62 `output * (1.0 + self.weight.float())` (Gemma2RMSNorm)",
        "modeling_gemma2.py:229 `self.scaling = config.query_pre_attn_scalar**-0.5`",
        "modeling_gemma2.py:203-208 softcap: `/ softcap`, `tanh`, `* softcap`, THEN `+ attention_mask`",
        "modeling_gemma2.py:246 `self.sliding_window = config.sliding_window if self.layer_type == \"sliding_attention\" else None`",
        "modeling_gemma2.py:326, 332 post_attention_layernorm / post_feedforward_layernorm on the branch outputs",
        "modeling_gemma2.py:388 `embed_scale=self.config.hidden_size**0.5` (Gemma2TextScaledWordEmbedding :349)",
        "modeling_gemma2.py:527-530 final soft-cap on the logits",
        "configuration_gemma2.py:95-98 default layer_types: sliding iff (i+1) % 2",
        "masking_utils.py sliding_window_overlay: kv_idx > q_idx - sliding_window (w keys including self)",
    ],
    "glm_partial_interleaved": [
        "modeling_glm.py:99 `dim = int(head_dim * partial_rotary_factor)` (inv_freq over R = 8 dims)",
        "modeling_glm.py:164-165 rotate_half = stack((-x[..., 1::2], x[..., 0::2])).flatten (interleaved)",
        "modeling_glm.py:191-197 cos/sin `[..., : cos.shape[-1] // 2].repeat_interleave(2)`; rotary on q[..., :rotary_dim], rest passes",
        "modeling_glm.py:60 `gate, up_states = up_states.chunk(2, dim=-1)`",
        "configuration_glm.py:77 partial_rotary_factor default 0.5",
    ],
    "mixtral_moe": [
        "modeling_mixtral.py:106-110 router: `F.linear(x, weight)`; `softmax(router_logits.float())`; `topk`; "
        "`router_top_value /= router_top_value.sum(...)`",
        "modeling_mixtral.py:65-66, 87-89 fused experts gate_up_proj [E, 2I, H] (chunk(2): gate, up), down_proj [E, H, I]",
        "conversion_mapping.py:1009-1034 on disk: block_sparse_moe.experts.*.w1 / w3 concatenated (gate, up) into "
        "mlp.experts.gate_up_proj, w2 stacked into down_proj",
    ],
    "qwen2moe_shared": [
        "modeling_qwen2_moe.py:330-334 `softmax(router_logits, dtype=torch.float)`; topk; renormalize only if norm_topk_prob",
        "modeling_qwen2_moe.py:354-356 `F.sigmoid(self.shared_expert_gate(x)) * shared_expert_output`; expert_output + shared",
        "modeling_qwen2_moe.py:365-366 sparse layer iff `layer_idx not in mlp_only_layers and (layer_idx + 1) % "
        "decoder_sparse_step == 0`",
    ],
    "bloom_alibi": [
        "modeling_bloom.py:45-89 build_alibi_tensor: float32 `slopes[..., None] * arange_tensor`",
        "modeling_bloom.py:186-187 `inv_norm_factor = 1/sqrt(head_dim)`, `beta = 1.0`; :270 `alibi.baddbmm(q, k^T, "
        "beta, alpha=inv_norm_factor)` = alibi + q.k/sqrt(hd)",
        "modeling_bloom.py:214 `fused_qkv.view(batch_size, seq_length, self.num_heads, 3, self.head_dim)`",
        "modeling_bloom.py:120 bloom_gelu_forward `x * 0.5 * (1.0 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))`",
        "modeling_bloom.py:375 apply_residual_connection_post_layernorm picks the residual",
    ],
}

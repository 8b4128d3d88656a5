"""The Stable Audio 3 DiT and its duration embedder in MLX, written from diffusers 0.42.1.

One file on purpose (longer than most): it mirrors one diffusers module op for op, so a reader
checks it against that module side by side; splitting it would split that comparison.

`StableAudio3DiT` is diffusers' `StableAudio3DiTModel` and `DurationEmbedder` is
`StableAudio3DurationEmbedder` (diffusers/pipelines/stable_audio_3/modeling_stable_audio_3.py),
op for op, with the same constructor arguments (the diffusers `config.json` fields) and the same
forward semantics:

    hidden_states [B, C, T], timestep [B], encoder_hidden_states [B, L, D],
    global_hidden_states [B, D], encoder_attention_mask [B, L] bool,
    local_add_cond [B, 1 + C, T]                                     ->  prediction [B, C, T]

One argument diffusers' forward lacks: `padding_mask` [B, T] bool (True where there is audio),
underfit's `mask_padding_attention` as Stable Audio 3's own transformer applies it on its SDPA
path (stable-audio-3 `models/transformer.py`, `Attention.apply_attn`): in every block's
self-attention the value vectors of padded frames are zeroed, the memory tokens always valid.
The torch trainer does the same to diffusers' DiT with hooks (`trainer.PaddedValues`). None
(the default) is diffusers' forward, op for op.

Layout. The public inputs and output are channels-first, as diffusers has them; inside, audio is
channels-last [B, T, C] from the first line of `__call__` to the last, because MLX's Conv1d
takes (N, L, C) activations and (out, k, in) weights (torch: (N, C, L) and (out, in, k)). So
there are three activation transposes in all (hidden_states and local_add_cond in, the
prediction out, each marked in `__call__`), and the conv weights are transposed once, at
conversion (`mlx/convert.py`). Attention runs in MLX's (B, heads, S, head_dim).

Parameter names are diffusers' module names, except that MLX's `nn.Sequential` puts its
children under `.layers.` and `RMSNorm` calls its scale `weight` (diffusers: `gamma`). The
fixed frequency tables diffusers keeps as buffers (`rotary_pos_emb.inv_freq`, the embedder's
`freqs`) are frozen parameters here, loaded from the base model like every other tensor, so
`trainable_parameters()` never holds them.

Precision follows diffusers: RMS norms, RoPE and the Fourier features are computed in float32
whatever the weights' dtype, then cast back; RoPE's position table is built in inv_freq's dtype
first, as diffusers builds it (see `RotaryEmbedding`).

`cross_attention_context` is the pipeline's `prepare_cross_attention`: the duration embedding
appended to the prompt tokens, the context the DiT is trained and sampled with.

Building a module draws its throw-away initial weights from MLX's global random state
(nn.Linear's init): seed after building, not before, where that state matters.

Gradient checkpointing: with `gradient_checkpointing` set on the DiT, each block runs under
`mx.checkpoint`, as diffusers' `enable_gradient_checkpointing` runs each of its blocks under
torch's checkpoint: the block's activations are recomputed in the backward pass (mlx-lm's
`grad_checkpoint`, per block instance rather than per class).

Not handled: the attention-processor machinery (diffusers' `set_attn_processor`); the text
encoder and the VAE (torch only: training reads pre-encoded files); adapters and training
(`tunesmith.adapters.mlx_lora`, `mlx/trainer.py`).
"""

from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn
import numpy as np

F32 = mx.float32


class RMSNorm(nn.Module):
    """diffusers' `StableAudio3RMSNorm`: `force_fp32=True`, so the statistics and the scale are
    applied in float32 and the result is cast back to the input's dtype."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = mx.ones((dim,))  # diffusers: `gamma`

    def __call__(self, x: mx.array) -> mx.array:
        # fast.rms_norm is x * rsqrt(mean(x²) + eps) * weight, the same expression.
        out = mx.fast.rms_norm(x.astype(F32), self.weight.astype(F32), self.eps)
        return out.astype(x.dtype)


def _expo_frequencies(half: int, min_freq: float, max_freq: float) -> mx.array:
    """exp(linspace(0, 1, half) · (log max − log min) + log min) in float32, close to torch's.

    The DiT's timestep frequencies are no buffer, so each framework computes them, and the
    features cos/sin(2π·t·f) magnify any difference: at f = 10⁴ one ulp of f is ~0.006 rad.
    Measured on the 256-wide features (real size) against diffusers' float32 torch ops:
    all in MLX (its CPU `exp` is a few ulp off) 56 dB; all in float64, rounded once, 49 dB
    (torch's float32 exponent rounds differently); the recipe here 76 dB: the correctly
    rounded float32 ramp, the exponent in float32 as torch computes it, the exponential in
    float64 rounded once (torch's exp is nearly correctly rounded). torch's own float32
    linspace rounds some entries an ulp away, depending on the CPU's SIMD width, so no
    portable recipe reproduces it bit for bit.
    """
    ramp = np.linspace(0.0, 1.0, half, dtype=np.float32)  # computed in float64, rounded once
    exponent = ramp * np.float32(math.log(max_freq) - math.log(min_freq)) + np.float32(
        math.log(min_freq)
    )
    return mx.array(np.exp(exponent.astype(np.float64)).astype(np.float32))


def _rotate_half(x: mx.array) -> mx.array:
    x1, x2 = mx.split(x, 2, axis=-1)
    return mx.concatenate([-x2, x1], axis=-1)


def _apply_rotary_partial(x: mx.array, freqs: mx.array) -> mx.array:
    """Rotate the first `rot_dim` channels of x [B, H, S, D] by freqs [S, rot_dim] (float32),
    leave the rest: non-interleaved halves, as diffusers' `_apply_rotary_partial`."""
    rot_dim = freqs.shape[-1]
    rot, rest = x[..., :rot_dim].astype(F32), x[..., rot_dim:]
    freqs = freqs.astype(F32)
    rot = rot * mx.cos(freqs) + _rotate_half(rot) * mx.sin(freqs)
    return mx.concatenate([rot.astype(x.dtype), rest], axis=-1)


def _modulate(x: mx.array, shift: mx.array, scale: mx.array) -> mx.array:
    """AdaLN: x [B, S, E] · (1 + scale) + shift, scale and shift [B, E] broadcast over S."""
    return x * (1 + scale[:, None]) + shift[:, None]


def _mlp(dim_in: int, dim: int, dim_out: int, bias: bool) -> nn.Sequential:
    """Linear → SiLU → Linear; children 0 and 2 as in diffusers' nn.Sequential."""
    return nn.Sequential(
        nn.Linear(dim_in, dim, bias=bias), nn.SiLU(), nn.Linear(dim, dim_out, bias=bias)
    )


class RotaryEmbedding(nn.Module):
    """Partial RoPE over the first 2·len(inv_freq) channels of each head."""

    def __init__(self, dim: int, base: int = 10000):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (mx.arange(0, dim, 2).astype(F32) / dim))
        self.freeze()  # a fixed table (a buffer in diffusers), overwritten by the base model's

    def __call__(self, seq_len: int) -> mx.array:
        # In inv_freq's dtype, as diffusers: with a bfloat16 base model the positions are
        # bfloat16 too, exact only up to 256 (memory tokens included). Mirrored, not fixed.
        positions = mx.arange(seq_len).astype(self.inv_freq.dtype)
        freqs = mx.outer(positions, self.inv_freq)
        return mx.concatenate([freqs, freqs], axis=-1)  # [S, rot_dim]


def _split_heads(x: mx.array, heads: int) -> mx.array:
    """[B, S, H·D] -> [B, H, S, D], MLX attention's layout (diffusers keeps [B, S, H, D])."""
    b, s, e = x.shape
    return x.reshape(b, s, heads, e // heads).transpose(0, 2, 1, 3)


def _merge_heads(x: mx.array) -> mx.array:
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def _attention(qs: list[mx.array], ks: list[mx.array], v: mx.array) -> mx.array:
    """Attn(q1, k1, v) − Attn(q2, k2, v) (differential), or Attn(q, k, v); no mask, scale
    1/√head_dim (SDPA's default, which diffusers leaves as it is)."""
    scale = v.shape[-1] ** -0.5
    out = mx.fast.scaled_dot_product_attention(qs[0], ks[0], v, scale=scale)
    if len(qs) == 2:
        out = out - mx.fast.scaled_dot_product_attention(qs[1], ks[1], v, scale=scale)
    return out


class SelfAttention(nn.Module):
    """Differential self-attention with RMS QK-norm and partial RoPE.

    `to_qkv` keeps diffusers' row order [q1 | q2 | k1 | k2 | v] (underfit's files order the
    rows differently; `names.py` permutes them at the file boundary, so
    weights and adapters here stay in diffusers' order). Without differential attention the
    rows are [q | k | v].
    """

    def __init__(self, dim: int, dim_heads: int, use_differential: bool):
        super().__init__()
        self.heads = dim // dim_heads
        self.n = 2 if use_differential else 1  # query/key pairs
        self.to_qkv = nn.Linear(dim, dim * (2 * self.n + 1), bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.q_norm = RMSNorm(dim_heads)
        self.k_norm = RMSNorm(dim_heads)

    def __call__(self, x: mx.array, rope: mx.array, valid: mx.array | None = None) -> mx.array:
        """`valid` [B, S] bool: the tokens whose values are attended to (the rest zeroed)."""
        qkv = mx.split(self.to_qkv(x), 2 * self.n + 1, axis=-1)
        *qk, v = [_split_heads(part, self.heads) for part in qkv]
        if valid is not None:
            v = v * valid[:, None, :, None].astype(v.dtype)
        qs = [_apply_rotary_partial(self.q_norm(q), rope) for q in qk[: self.n]]
        ks = [_apply_rotary_partial(self.k_norm(k), rope) for k in qk[self.n :]]
        return self.to_out(_merge_heads(_attention(qs, ks, v)))


class CrossAttention(nn.Module):
    """Differential cross-attention to the context: `to_q` gives [q1 | q2], `to_kv` gives
    [k1 | k2 | v]; no RoPE.

    No mask: diffusers substitutes the padding embedding for masked tokens and then attends
    to every token (`encoder_attention_mask = None` in its forward), as underfit does.
    """

    def __init__(self, dim: int, context_dim: int, dim_heads: int, use_differential: bool):
        super().__init__()
        self.heads = dim // dim_heads
        self.n = 2 if use_differential else 1
        self.to_q = nn.Linear(dim, dim * self.n, bias=False)
        self.to_kv = nn.Linear(context_dim, dim * (self.n + 1), bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.q_norm = RMSNorm(dim_heads)
        self.k_norm = RMSNorm(dim_heads)

    def __call__(self, x: mx.array, context: mx.array) -> mx.array:
        q = mx.split(self.to_q(x), self.n, axis=-1)
        *k, v = [
            _split_heads(part, self.heads)
            for part in mx.split(self.to_kv(context), self.n + 1, axis=-1)
        ]
        qs = [self.q_norm(_split_heads(part, self.heads)) for part in q]
        ks = [self.k_norm(part) for part in k]
        return self.to_out(_merge_heads(_attention(qs, ks, v)))


class FeedForward(nn.Module):
    """SwiGLU: proj_in gives [hidden | gate], out = proj_out(hidden · silu(gate))."""

    def __init__(self, dim: int, mult: float):
        super().__init__()
        inner = int(dim * mult)
        self.proj_in = nn.Linear(dim, inner * 2, bias=True)
        self.proj_out = nn.Linear(inner, dim, bias=True)

    def __call__(self, x: mx.array) -> mx.array:
        hidden, gate = mx.split(self.proj_in(x), 2, axis=-1)
        return self.proj_out(hidden * nn.silu(gate))


class DiTBlock(nn.Module):
    """AdaLN self-attention, plain-RMS cross-attention, the inpaint add, AdaLN feed-forward.

    The modulation is `to_scale_shift_gate + global_modulation`, six chunks in the order
    (scale_attn, shift_attn, gate_attn, scale_ff, shift_ff, gate_ff); a gated branch is
    scaled by sigmoid(1 − gate).
    """

    def __init__(self, dim, context_dim, dim_heads, use_differential, ff_mult, local_add_cond_dim):
        super().__init__()
        self.pre_norm = RMSNorm(dim)
        self.self_attn = SelfAttention(dim, dim_heads, use_differential)
        self.cross_attend_norm = RMSNorm(dim)
        self.cross_attn = CrossAttention(dim, context_dim, dim_heads, use_differential)
        self.ff_norm = RMSNorm(dim)
        self.ff = FeedForward(dim, ff_mult)
        self.to_scale_shift_gate = mx.random.normal((6 * dim,)) / dim**0.5
        self.to_local_embed = _mlp(local_add_cond_dim, dim, dim, bias=True)

    def __call__(
        self, x, context, global_modulation, rope, local_seq, num_memory_tokens: int, valid=None
    ):
        modulation = self.to_scale_shift_gate + global_modulation
        scale_attn, shift_attn, gate_attn, scale_ff, shift_ff, gate_ff = mx.split(
            modulation, 6, axis=-1
        )

        attn = self.self_attn(_modulate(self.pre_norm(x), shift_attn, scale_attn), rope, valid)
        x = x + attn * mx.sigmoid(1 - gate_attn)[:, None]

        x = x + self.cross_attn(self.cross_attend_norm(x), context)

        if local_seq is not None:  # audio positions only, not the memory tokens
            m = num_memory_tokens
            x = mx.concatenate([x[:, :m], x[:, m:] + self.to_local_embed(local_seq)], axis=1)

        ff = self.ff(_modulate(self.ff_norm(x), shift_ff, scale_ff))
        return x + ff * mx.sigmoid(1 - gate_ff)[:, None]


class StableAudio3DiT(nn.Module):
    """diffusers' `StableAudio3DiTModel` in MLX; arguments are its config fields."""

    def __init__(
        self,
        io_channels: int = 256,
        patch_size: int = 1,
        embed_dim: int = 1536,
        depth: int = 24,
        num_heads: int = 24,
        cond_token_dim: int = 768,
        global_cond_dim: int = 768,
        local_add_cond_dim: int = 257,
        timestep_features_dim: int = 256,
        ff_mult: float = 4.0,
        num_memory_tokens: int = 64,
        use_differential_attention: bool = True,
    ):
        super().__init__()
        self.io_channels, self.patch_size = io_channels, patch_size
        self.num_memory_tokens = num_memory_tokens
        dim_heads = embed_dim // num_heads

        # ExpoFourierFeatures(min_freq 0.5, max_freq 10⁴): fixed, not a parameter.
        self._timestep_freqs = _expo_frequencies(timestep_features_dim // 2, 0.5, 10000.0)
        self.to_timestep_embed = _mlp(timestep_features_dim, embed_dim, embed_dim, bias=True)
        self.prompt_padding_embedding = mx.zeros((cond_token_dim,))
        self.to_cond_embed = _mlp(cond_token_dim, embed_dim, embed_dim, bias=False)
        self.to_global_embed = _mlp(global_cond_dim, embed_dim, embed_dim, bias=False)
        self.global_cond_embedder = _mlp(embed_dim, embed_dim, 6 * embed_dim, bias=True)

        # Kernel-1 convs, weights (out, 1, in): see the module docstring.
        self.preprocess_conv = nn.Conv1d(io_channels, io_channels, 1, bias=False)
        self.postprocess_conv = nn.Conv1d(io_channels, io_channels, 1, bias=False)
        self.proj_in = nn.Linear(io_channels * patch_size, embed_dim, bias=False)
        self.proj_out = nn.Linear(embed_dim, io_channels * patch_size, bias=False)
        if num_memory_tokens > 0:
            self.memory_tokens = mx.random.normal((num_memory_tokens, embed_dim)) * 0.02
        self.rotary_pos_emb = RotaryEmbedding(dim_heads // 2)
        self.transformer_blocks = [
            DiTBlock(
                embed_dim,
                embed_dim,
                dim_heads,
                use_differential_attention,
                ff_mult,
                local_add_cond_dim,
            )
            for _ in range(depth)
        ]
        self.gradient_checkpointing = False  # see the module docstring

    def timestep_features(self, timestep: mx.array) -> mx.array:
        """[B] -> [B, timestep_features_dim]: cos | sin of 2π·t·freqs, in float32."""
        args = timestep.astype(F32)[:, None] * self._timestep_freqs * 2.0 * math.pi
        return mx.concatenate([mx.cos(args), mx.sin(args)], axis=-1)

    def condition(
        self,
        timestep: mx.array,
        encoder_hidden_states: mx.array,
        global_hidden_states: mx.array,
        encoder_attention_mask: mx.array | None = None,
        dtype: mx.Dtype | None = None,
    ) -> tuple[mx.array, mx.array]:
        """(cross-attention context [B, L, E], AdaLN modulation [B, 6E]) for one forward.

        Where the mask is False the token is replaced by the learned padding embedding, in
        the raw cond_token_dim space before `to_cond_embed`; every token is then attended to.
        `dtype`: what the float32 timestep features are cast to (diffusers: hidden_states'
        dtype; by default the weights').
        """
        if encoder_attention_mask is not None:
            pad = self.prompt_padding_embedding.astype(encoder_hidden_states.dtype)[None, None]
            valid = encoder_attention_mask.astype(mx.bool_)[..., None]
            encoder_hidden_states = mx.where(valid, encoder_hidden_states, pad)
        context = self.to_cond_embed(encoder_hidden_states)
        dtype = self.to_timestep_embed.layers[0].weight.dtype if dtype is None else dtype
        features = self.timestep_features(timestep).astype(dtype)
        global_embed = self.to_global_embed(global_hidden_states) + self.to_timestep_embed(features)
        return context, self.global_cond_embedder(global_embed)

    def __call__(
        self,
        hidden_states: mx.array,
        timestep: mx.array,
        encoder_hidden_states: mx.array,
        global_hidden_states: mx.array,
        encoder_attention_mask: mx.array | None = None,
        local_add_cond: mx.array | None = None,
        padding_mask: mx.array | None = None,
    ) -> mx.array:
        """The prediction [B, C, T] (the velocity, rectified flow) for hidden_states [B, C, T];
        `padding_mask` [B, T] bool: see the module docstring."""
        context, global_modulation = self.condition(
            timestep,
            encoder_hidden_states,
            global_hidden_states,
            encoder_attention_mask,
            dtype=hidden_states.dtype,
        )
        # Transpose 1 of 3: [B, C, T] -> [B, T, C], channels-last for the convs and the rest.
        x = hidden_states.transpose(0, 2, 1)
        x = self.preprocess_conv(x) + x
        b, t, c = x.shape
        p = self.patch_size
        if t % p:
            raise ValueError(f"hidden_states has {t} frames, not a multiple of patch_size={p}")
        x = self.proj_in(x.reshape(b, t // p, c * p))

        local_seq = None
        if local_add_cond is not None:
            if p > 1:
                raise ValueError(f"local_add_cond needs patch_size 1 (got patch_size={p})")
            # Transpose 2 of 3: [B, 1+C, T] -> [B, T, 1+C].
            local_seq = local_add_cond.transpose(0, 2, 1)

        m = self.num_memory_tokens
        if m > 0:
            memory = mx.broadcast_to(self.memory_tokens[None], (b, m, self.memory_tokens.shape[-1]))
            x = mx.concatenate([memory.astype(x.dtype), x], axis=1)
        valid = None
        if padding_mask is not None:  # the memory tokens are always attended to
            memory = mx.ones((b, m), dtype=mx.bool_)
            valid = mx.concatenate([memory, padding_mask.astype(mx.bool_)], axis=1)
        rope = self.rotary_pos_emb(x.shape[1])
        for block in self.transformer_blocks:
            if self.gradient_checkpointing:
                x = _checkpointed(block, x, context, global_modulation, rope, local_seq, m, valid)
            else:
                x = block(x, context, global_modulation, rope, local_seq, m, valid)

        x = self.proj_out(x[:, m:]).reshape(b, t, c)
        x = self.postprocess_conv(x) + x
        return x.transpose(0, 2, 1)  # Transpose 3 of 3: back to [B, C, T]


def _checkpointed(
    block: DiTBlock, x, context, global_modulation, rope, local_seq, m: int, valid=None
):
    """`block(...)` under `mx.checkpoint`. The block's trainable parameters (its adapters) are
    inputs of the checkpointed function, so their gradients flow through the recomputation;
    its frozen weights, and the padding mask, are constants of it."""

    def run(params, x, context, global_modulation, rope, local_seq):
        block.update(params)
        return block(x, context, global_modulation, rope, local_seq, m, valid)

    return mx.checkpoint(run)(
        block.trainable_parameters(), x, context, global_modulation, rope, local_seq
    )


class DurationEmbedder(nn.Module):
    """diffusers' `StableAudio3DurationEmbedder`: seconds [B] -> [B, output_dim].

    Clamp to [min_val, max_val], normalise to [0, 1], cos | sin of 2π·t·freqs (float32),
    one Linear. `freqs` is frozen and comes from the base model (a buffer in diffusers).
    """

    def __init__(
        self,
        output_dim: int = 768,
        fourier_dim: int = 256,
        min_val: float = 0.0,
        max_val: float = 384.0,
        min_freq: float = 0.5,
        max_freq: float = 10000.0,
    ):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val
        self.freqs = _expo_frequencies(fourier_dim // 2, min_freq, max_freq)
        self.linear = nn.Linear(fourier_dim, output_dim)
        self.freeze(recurse=False, keys=["freqs"])

    def __call__(self, seconds: mx.array) -> mx.array:
        seconds = mx.clip(seconds.astype(F32), self.min_val, self.max_val)
        t_norm = ((seconds - self.min_val) / (self.max_val - self.min_val)).reshape(-1, 1)
        args = t_norm * self.freqs[None] * 2.0 * math.pi
        fourier = mx.concatenate([mx.cos(args), mx.sin(args)], axis=-1)
        return self.linear(fourier.astype(self.linear.weight.dtype))


def cross_attention_context(
    prompt_embeds: mx.array, prompt_mask: mx.array, duration_embedding: mx.array
) -> tuple[mx.array, mx.array]:
    """The pipeline's `prepare_cross_attention`: the duration embedding [B, D] appended to the
    prompt tokens [B, L, D] as one more, always valid, token -> ([B, L+1, D], [B, L+1] bool)."""
    token = duration_embedding[:, None].astype(prompt_embeds.dtype)
    valid = mx.ones((prompt_mask.shape[0], 1), dtype=mx.bool_)
    return (
        mx.concatenate([prompt_embeds, token], axis=1),
        mx.concatenate([prompt_mask.astype(mx.bool_), valid], axis=1),
    )

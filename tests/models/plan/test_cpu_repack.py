"""Which weights llama.cpp's CPU backend repacks, from its own feature list, and how the forecast counts them."""

from __future__ import annotations

from models.formats.ggml_types import GGML_TYPES
from models.plan.cpu_repack import parse_system_info, parts_by_type, repack_types
from models.plan.forecast import ForecastSettings, ModelShape, forecast, scaled_to
from tests.fixtures.real_shapes import tensor

ID = {t.name: i for i, t in GGML_TYPES.items()}
X86 = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
ARM = "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | MATMUL_INT8 = 1 | SVE = 0 | REPACK = 1 | "
CUDA = "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | AVX2 = 1 | REPACK = 1 | "


def names(types: frozenset[int]) -> set[str]:
    return {GGML_TYPES[t].name for t in types}


def test_features_are_read_from_llama_cpp_s_own_line():
    assert {"AVX2", "REPACK", "SSE3"} <= parse_system_info(X86)
    assert "SVE" not in parse_system_info(ARM)
    assert "AVX2" in parse_system_info(CUDA) and "PEER_MAX_BATCH_SIZE" not in parse_system_info(CUDA)


def test_repacked_types_follow_the_cpu():
    assert names(repack_types(parse_system_info(X86))) == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}
    assert {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0"} <= names(repack_types(parse_system_info(ARM)))
    # A build without the repack buffer repacks nothing, whatever the CPU has.
    assert repack_types(parse_system_info(X86.replace("REPACK = 1", "REPACK = 0"))) == frozenset()
    assert names(repack_types(parse_system_info(X86 + "AVX512 = 1 |"))) >= {"Q2_K"}


def test_only_quantized_matrices_with_whole_row_groups_count():
    parts = parts_by_type([
        tensor("blk.0.attn_q.weight", "Q4_K", 4096, 4096),
        tensor("blk.0.ffn_down.weight", "Q6_K", 14336, 4096),
        tensor("blk.0.attn_norm.weight", "F32", 4096),  # 1-D
        tensor("blk.0.attn_k.weight", "F16", 4096, 1024),  # not quantized: never repacked
        tensor("blk.0.ffn_up_exps.weight", "Q4_K", 2048, 768, 128),  # experts: 3-D, repacked too
        tensor("blk.0.odd.weight", "Q4_0", 4096, 1022),  # rows not a multiple of 8
    ])
    q4k = 4096 * 4096 // 256 * 144 + 2048 * 768 * 128 // 256 * 144
    assert dict(parts) == {ID["Q4_K"]: q4k, ID["Q6_K"]: 14336 * 4096 // 256 * 210}


def shape(**kw) -> ModelShape:
    n = 2
    base = dict(
        n_layers=n, n_embd=256, n_heads=4, n_kv_heads=(2,) * n, head_dim_k=64, head_dim_v=64, n_vocab=1000,
        n_ctx_train=4096, swa_layers=(False,) * n, sliding_window=None, layer_weight_bytes=(1000, 1000),
        input_weight_bytes=500, output_weight_bytes=400,
        layer_repack=(((ID["Q4_K"], 800), (ID["Q6_K"], 150)),) * n, output_repack=((ID["Q6_K"], 400),),
        input_repack=((ID["Q4_K"], 500),), quant="Q4_K_M",
    )
    return ModelShape(**{**base, **kw})


def test_the_cpu_layers_and_output_carry_a_second_copy():
    x86 = repack_types(parse_system_info(X86))
    s = ForecastSettings(n_ctx=2048, repack_types=x86)
    plain = forecast(shape(), ForecastSettings(n_ctx=2048)).devices["cpu"].weights_bytes
    assert plain == 2 * 1000 + 500 + 400
    assert forecast(shape(), s).devices["cpu"].weights_bytes == plain + 2 * 800  # Q6_K is not repacked on x86
    # The output layer and one layer on the GPU (llama.cpp offloads the output first): only the CPU's layer is repacked.
    one = forecast(shape(), ForecastSettings(n_ctx=2048, n_gpu_layers=2, repack_types=x86))
    assert one.devices["cpu"].weights_bytes == 1000 + 500 + 800
    # Only the output layer on the GPU: both layers stay, and are repacked.
    output = forecast(shape(), ForecastSettings(n_ctx=2048, n_gpu_layers=1, repack_types=x86))
    assert output.devices["cpu"].weights_bytes == 2 * 1000 + 500 + 2 * 800
    # A tied output is the token embedding loaded again as a matrix, and repacked as such.
    tied = forecast(shape(output_tied=True, output_weight_bytes=0, output_repack=()), s)
    assert tied.devices["cpu"].weights_bytes == 2 * 1000 + 500 + 2 * 800 + 500


def test_other_levels_of_a_repo_get_llama_cpp_s_usual_mix():
    x86 = repack_types(parse_system_info(X86))
    s = ForecastSettings(n_ctx=2048, repack_types=x86)
    same = scaled_to(shape(), 2 * 2900, "Q4_K_M")  # the level the header was read at: its own types, scaled
    assert same.layer_repack[0] == ((ID["Q4_K"], 1600), (ID["Q6_K"], 300))
    q8 = scaled_to(shape(), 2 * 2900, "Q8_0")  # Q8_0 is not repacked on x86
    assert forecast(q8, s).devices["cpu"].weights_bytes == 2 * 2900
    q4_0 = scaled_to(shape(), 2900, "Q4_0")  # every layer matrix is Q4_0, the output Q6_K
    assert forecast(q4_0, s).devices["cpu"].weights_bytes == 2900 + sum(q4_0.layer_weight_bytes)


def test_the_usual_q4_k_m_mix_is_llama_cpp_s_on_a_real_8b_layout():
    from models.formats.quant_mix import estimated_layer_parts
    from tests.fixtures.real_shapes import LLAMA_3_1_8B, q4_k_m_header

    header = q4_k_m_header(LLAMA_3_1_8B)  # the types llama.cpp's quantizer gives each tensor
    layers = [t for t in header.tensors if t.name.startswith("blk.")]
    total = sum(t.nbytes for t in layers)
    exact = sum(t.nbytes for t in layers if t.type_name == "Q4_K") / total
    estimated = dict(estimated_layer_parts("Q4_K_M", total))[ID["Q4_K"]] / total
    assert abs(estimated - exact) < 0.03, (estimated, exact)

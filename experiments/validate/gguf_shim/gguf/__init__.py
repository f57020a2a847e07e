"""A minimal stand-in (shim) for the `gguf` Python package (ggml-org's gguf-py), only what ComfyUI-GGUF's dequant.py
(city96/ComfyUI-GGUF 795e451) touches: GGMLQuantizationType, GGML_QUANT_SIZES and quants.dequantize (its slow numpy
fallback, which the GPU path never reaches; here it raises). It reads and writes no GGUF file.

The numbers are ggml's: the type ids are `enum ggml_type` in ggml.h (= gguf-py gguf/constants.py
GGMLQuantizationType; 4 and 5 are the removed Q4_2 / Q4_3, 31-33 the removed Q4_0_4_4 / 4_8 / 8_8), and
GGML_QUANT_SIZES is gguf-py's {type: (elements per block, bytes per block)}, from the block structs of
ggml-common.h (block_q4_0 = half d + 16 bytes, block_q4_K = half d, dmin + 12 scale bytes + 128 quant bytes, ...).
"""
from enum import IntEnum


class GGMLQuantizationType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30


QK_K = 256
_T = GGMLQuantizationType
GGML_QUANT_SIZES = {
    _T.F32: (1, 4),
    _T.F16: (1, 2),
    _T.BF16: (1, 2),
    _T.Q4_0: (32, 2 + 16),
    _T.Q4_1: (32, 2 + 2 + 16),
    _T.Q5_0: (32, 2 + 4 + 16),
    _T.Q5_1: (32, 2 + 2 + 4 + 16),
    _T.Q8_0: (32, 2 + 32),
    _T.Q2_K: (QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),  # 84
    _T.Q3_K: (QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),  # 110
    _T.Q4_K: (QK_K, 2 + 2 + QK_K // 2 + 12),  # 144
    _T.Q5_K: (QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),  # 176
    _T.Q6_K: (QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),  # 210
    _T.Q8_K: (QK_K, 4 + QK_K + QK_K // 8),  # 292 (Q8_1, unused here, left out)
    _T.IQ4_NL: (32, 2 + 16),
    _T.IQ4_XS: (QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),  # 136
}
del _T


class _Quants:
    """gguf.quants as dequant.py uses it: only dequantize, its numpy fallback for types without a torch kernel."""

    @staticmethod
    def dequantize(data, qtype):
        raise NotImplementedError(f"gguf shim: no numpy dequantize (qtype {qtype!r}); ComfyUI-GGUF's torch path "
                                  "covers every type the harness uses")


quants = _Quants()

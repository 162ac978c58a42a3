"""Tests for dgemm_cli.spec: YAML spec -> validated `Spec`. No GPU needed.

Every invalid spec must raise exactly one `SpecError` (a `DeepGemmError`) whose message names the
file, the offending key and a fix. Error cases go through `load_spec` on a real file so that the
file name in the message is the one the user passed.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from dgemm_cli.errors import EXIT_USAGE, DeepGemmError, SpecError
from dgemm_cli.spec import DTYPE_ALIASES, DTYPE_BYTES, OperandView, Spec, load_spec, parse_spec

SPECS_DIR = Path(__file__).resolve().parent.parent / "specs"
SPEC_FILES = sorted(SPECS_DIR.glob("*.yaml"))


# ------------------------------------------------------------------------------------------------
# helpers


def gemm_spec(**top) -> dict:
    spec = {"name": "g", "gemm": {"m": 4, "n": 6, "k": 8}}
    spec.update(top)
    return spec


def conv_spec(**top) -> dict:
    """The 1x1 convolution `nchw,kc->nkhw`, small."""
    spec = {
        "name": "conv",
        "contraction": "nchw,kc->nkhw",
        "sizes": {"n": 2, "c": 8, "h": 3, "w": 5, "k": 16},
    }
    spec.update(top)
    return spec


def write(tmp_path: Path, data, name: str = "bad_spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def expect_error(tmp_path: Path, data, key: str, problem: str | None = None) -> SpecError:
    """Load `data` from a file and check the SpecError names the file, the key and a fix."""
    path = write(tmp_path, data)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert isinstance(err, DeepGemmError)
    assert err.exit_code == EXIT_USAGE
    msg = str(err)
    assert str(path) in msg and "bad_spec.yaml" in msg
    assert err.key == key, msg
    assert f": {key}: " in msg, msg
    assert "Fix: " in msg, msg
    fix = msg.split("Fix: ", 1)[1]
    assert fix.strip() and fix == err.fix, msg
    if problem is not None:
        assert problem in err.problem, msg
    return err


# ------------------------------------------------------------------------------------------------
# errors: keys and types


def test_unknown_top_level_key(tmp_path):
    err = expect_error(tmp_path, gemm_spec(dtyp="f16"), "dtyp", "unknown key 'dtyp'")
    assert "dtype" in err.fix  # the fix lists the allowed keys


def test_unknown_operand_key(tmp_path):
    data = gemm_spec(operands={"A": {"stride": [8, 1]}})
    err = expect_error(tmp_path, data, "operands.A.stride", "unknown key 'stride'")
    assert "strides" in err.fix


def test_unknown_operand_name(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"E": {}}), "operands.E", "unknown key 'E'")


def test_unknown_gemm_key(tmp_path):
    expect_error(tmp_path, gemm_spec(gemm={"m": 4, "n": 4, "k": 4, "batches": 2}), "gemm.batches")


@pytest.mark.parametrize("value", ["abc", True, 4.0, None, [4]])
def test_wrong_type_size(tmp_path, value):
    data = gemm_spec(gemm={"m": value, "n": 4, "k": 4})
    expect_error(tmp_path, data, "gemm.m", "expected an integer")


def test_wrong_type_contraction_size(tmp_path):
    data = conv_spec()
    data["sizes"]["h"] = "3"
    expect_error(tmp_path, data, "sizes.h", "expected an integer")


def test_wrong_type_strides_scalar(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"A": {"strides": 5}}), "operands.A.strides",
                 "expected a list")


def test_wrong_type_stride_entry(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"B": {"strides": [6, True]}}), "operands.B.strides[1]",
                 "expected an integer")


def test_wrong_type_operand_not_mapping(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"A": [8, 1]}), "operands.A", "expected a mapping")


def test_wrong_type_alpha(tmp_path):
    expect_error(tmp_path, gemm_spec(alpha="one"), "alpha", "expected a number")


def test_non_finite_beta(tmp_path):
    expect_error(tmp_path, "name: g\ngemm: {m: 4, n: 4, k: 4}\nbeta: .nan\n", "beta", "not finite")


def test_missing_gemm_dim(tmp_path):
    expect_error(tmp_path, gemm_spec(gemm={"m": 4, "n": 4}), "gemm.k", "missing")


def test_missing_name(tmp_path):
    data = gemm_spec()
    del data["name"]
    expect_error(tmp_path, data, "name", "missing")


# ------------------------------------------------------------------------------------------------
# errors: the nearest valid key or value is suggested


@pytest.mark.parametrize("typo,meant", [("nmae", "name"), ("dtyp", "dtype"), ("contration", "contraction"),
                                        ("operand", "operands"), ("Arch", "arch"), ("acum", "accum")])
def test_top_key_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(**{typo: 1}), typo, f"unknown key '{typo}'")
    assert err.fix.startswith(f"did you mean '{meant}'? (valid: accum, alpha, arch,"), err.fix


@pytest.mark.parametrize("typo,meant,where", [("layuot", "layout", "`operands: {A: {layout: ...}}`"),
                                              ("bacth", "batch", "`gemm: {batch: ...}`")])
def test_top_key_typo_of_a_nested_key_says_where_it_goes(tmp_path, typo, meant, where):
    err = expect_error(tmp_path, gemm_spec(**{typo: 1}), typo, f"unknown key '{typo}'")
    assert err.fix == f"did you mean '{meant}'? It goes one level down: {where}"


def test_nested_key_at_top_says_where_it_goes(tmp_path):
    err = expect_error(tmp_path, gemm_spec(m=4), "m", "unknown key 'm'")
    assert err.fix == "'m' goes one level down: `gemm: {m: ...}`"


def test_unknown_key_far_from_everything_lists_the_valid_ones(tmp_path):
    err = expect_error(tmp_path, gemm_spec(foo=1), "foo")
    assert err.fix == ("use one of: accum, alpha, arch, beta, contraction, dtype, epilogue, gemm, name, operands, "
                       "plan, scales, sizes, zeros")


@pytest.mark.parametrize("typo,meant", [("layuot", "layout"), ("stride", "strides"), ("offest", "offset"),
                                        ("aling", "align"), ("byte_stride", "byte_strides"), ("DType", "dtype")])
def test_operand_key_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(operands={"B": {typo: 1}}), f"operands.B.{typo}")
    assert err.fix == (f"did you mean '{meant}'? (valid: align, byte_strides, dtype, layout, offset, packing, "
                       "strides)")


def test_operand_name_in_lower_case_suggests(tmp_path):
    err = expect_error(tmp_path, gemm_spec(operands={"a": {}}), "operands.a")
    assert err.fix == "did you mean 'A'? (valid: A, B, C, D)"
    err = expect_error(tmp_path, gemm_spec(operands={"E": {}}), "operands.E")
    assert err.fix == "use one of: A, B, C, D"


@pytest.mark.parametrize("typo,meant", [("bacth", "batch"), ("batches", "batch"), ("M", "m")])
def test_gemm_key_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(gemm={"m": 4, "n": 4, "k": 4, typo: 2}), f"gemm.{typo}")
    assert err.fix == f"did you mean '{meant}'? (valid: batch, k, m, n)"


def test_sizes_letter_in_other_case_suggests(tmp_path):
    data = conv_spec()
    data["sizes"]["H"] = data["sizes"].pop("h")
    err = expect_error(tmp_path, data, "sizes.H", "unknown key 'H'")
    assert err.fix == "did you mean 'h'? (valid: c, h, k, n, w)"


def test_sizes_letters_are_near_only_by_case(tmp_path):
    data = conv_spec()
    data["sizes"]["hw"] = 15
    err = expect_error(tmp_path, data, "sizes.hw")
    assert err.fix == "use one of: c, h, k, n, w"


@pytest.mark.parametrize("typo,meant", [("sm_90", "sm_90a"), ("SM-80", "sm_80"), ("sm_89a", "sm_89"),
                                        ("90a", "sm_90a"), ("sm90a", "sm_90a")])
def test_arch_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(arch=typo), "arch", "unsupported arch")
    assert err.fix == f"did you mean '{meant}'? (valid: sm_80, sm_86, sm_89, sm_90a, cpu)"


@pytest.mark.parametrize("arch", ["sm_75", "sm_100a", 90])
def test_arch_of_another_number_suggests_nothing(tmp_path, arch):
    err = expect_error(tmp_path, gemm_spec(arch=arch), "arch", "unsupported arch")
    assert err.fix == "use one of: sm_80, sm_86, sm_89, sm_90a, cpu"


@pytest.mark.parametrize("typo,meant", [("F16 ", "f16"), ("BF-16", "bf16"), ("F 16", "f16"), ("FP-32", "f32"),
                                        ("BFloat 16", "bf16"), ("f16 ", "f16"), ("16", "f16")])
def test_dtype_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(dtype=typo), "dtype", "unsupported dtype")
    assert err.fix == f"did you mean '{meant}'? (valid: f32, f16, bf16, e4m3, int8, uint8, int4, uint4)"
    err = expect_error(tmp_path, gemm_spec(operands={"C": {"dtype": typo}}), "operands.C.dtype")
    assert err.fix.startswith(f"did you mean '{meant}'?")


@pytest.mark.parametrize("dtype", ["f64", "float64", "fp64", "int16", "bfloat"])
def test_dtype_of_another_width_suggests_nothing(tmp_path, dtype):
    err = expect_error(tmp_path, gemm_spec(dtype=dtype), "dtype", "unsupported dtype")
    assert err.fix == "use one of: f32, f16, bf16, e4m3, int8, uint8, int4, uint4"


@pytest.mark.parametrize("typo,meant", [("column", "col"), ("rwo", "row"), ("Rwo", "row")])
def test_layout_typo_suggests(tmp_path, typo, meant):
    err = expect_error(tmp_path, gemm_spec(operands={"A": {"layout": typo}}), "operands.A.layout")
    assert err.fix == f"did you mean '{meant}'? (valid: row, col)"


@pytest.mark.parametrize("accum", ["fp32", "float", "F32", "float32", "FP32"])
def test_accum_takes_the_dtype_aliases_with_a_note(accum):
    spec = parse_spec(gemm_spec(accum=accum))
    assert spec.accum == "f32" and spec.notes == (f"accum '{accum}' read as f32",)


@pytest.mark.parametrize("accum", ["f16", "bf16", "half", "BF16"])
def test_a_16_bit_accumulator_is_refused_with_the_reason(tmp_path, accum):
    err = expect_error(tmp_path, gemm_spec(accum=accum), "accum", "accumulate in f32 only")
    assert "accum: f32" in err.fix


def test_an_unknown_accumulator_suggests_f32(tmp_path):
    err = expect_error(tmp_path, gemm_spec(accum="F-32"), "accum", "unsupported accumulator type")
    assert err.fix == "did you mean 'f32'? (valid: f32)"


@pytest.mark.parametrize("key,value,ours", [
    ("dtype", "FP16", "f16"), ("dtype", "BF16", "bf16"), ("dtype", "Half", "f16"), ("dtype", "F32", "f32"),
    ("dtype", "BFloat16", "bf16"), ("arch", "SM_90A", "sm_90a"), ("arch", "Sm_80", "sm_80"),
])
def test_names_in_other_case_are_read_as_ours_with_a_note(key, value, ours):
    spec = parse_spec(gemm_spec(**{key: value}))
    assert (spec.A.dtype if key == "dtype" else spec.arch) == ours
    assert spec.notes == (f"{key} '{value}' read as {ours}",)
    assert spec == parse_spec(gemm_spec(**{key: ours}))


def test_a_layout_in_other_case_is_read_as_ours_with_a_note():
    spec = parse_spec(gemm_spec(operands={"A": {"layout": "Col"}}))
    assert spec.A.strides == parse_spec(gemm_spec(operands={"A": {"layout": "col"}})).A.strides == (1, 4)
    assert spec.notes == ("operands.A.layout 'Col' read as col",)


# ------------------------------------------------------------------------------------------------
# dtype aliases: read as ours, with a note


ALIASES = [("fp16", "f16"), ("half", "f16"), ("float16", "f16"), ("bfloat16", "bf16"),
           ("fp32", "f32"), ("float", "f32"), ("float32", "f32")]


# FP8's names: an input type only (C may not take it), so not in the top-level alias test.
FP8_ALIASES = [("fp8", "e4m3"), ("fp8_e4m3", "e4m3"), ("float8_e4m3fn", "e4m3")]


def test_aliases_are_the_documented_ones():
    assert DTYPE_ALIASES == dict(ALIASES + FP8_ALIASES)


@pytest.mark.parametrize("alias,ours", ALIASES)
def test_top_level_dtype_alias(alias, ours):
    spec = parse_spec(gemm_spec(dtype=alias))
    assert (spec.A.dtype, spec.B.dtype, spec.C.dtype) == (ours, ours, ours)
    assert spec.notes == (f"dtype '{alias}' read as {ours}",)
    assert spec == parse_spec(gemm_spec(dtype=ours))  # notes are provenance, not compared
    assert all(op["dtype"] == ours for op in spec.to_dict()["operands"].values())


@pytest.mark.parametrize("alias,ours", ALIASES)
def test_operand_dtype_alias(alias, ours):
    spec = parse_spec(gemm_spec(dtype="bf16", operands={"C": {"dtype": alias}}))
    assert (spec.A.dtype, spec.C.dtype) == ("bf16", ours)
    assert spec.notes == (f"operands.C.dtype '{alias}' read as {ours}",)
    assert spec.to_dict()["operands"]["C"]["dtype"] == ours


def test_alias_notes_in_order_and_round_trip_without_notes():
    spec = parse_spec(gemm_spec(dtype="half", operands={"A": {"dtype": "fp16"}, "C": {"dtype": "float"}}))
    assert spec.notes == ("dtype 'half' read as f16", "operands.A.dtype 'fp16' read as f16",
                          "operands.C.dtype 'float' read as f32")
    again = parse_spec(spec.to_dict())
    assert again == spec and again.notes == ()


def test_alias_checks_follow_the_normalised_dtype(tmp_path):
    # byte strides and align are checked against the element size of the dtype the alias stands for
    spec = parse_spec(gemm_spec(dtype="float", operands={"A": {"byte_strides": [32, 4]}}))
    assert spec.A.strides == (8, 1) and spec.A.align == 4
    expect_error(tmp_path, gemm_spec(dtype="float32", operands={"A": {"byte_strides": [32, 2]}}),
                 "operands.A.byte_strides[1]", "not a multiple of the 4-byte f32 element")
    expect_error(tmp_path, gemm_spec(operands={"A": {"dtype": "half"}, "B": {"dtype": "bfloat16"}}),
                 "operands.B.dtype", "A is f16 but B is bf16")


def test_no_notes_without_aliases():
    assert parse_spec(gemm_spec(dtype="bf16")).notes == ()


# ------------------------------------------------------------------------------------------------
# errors: shapes and letters


@pytest.mark.parametrize("key", ["strides", "byte_strides"])
@pytest.mark.parametrize("strides", [[1], [24, 8, 1]])
def test_stride_count_mismatch(tmp_path, key, strides):
    data = gemm_spec(operands={"A": {key: strides}})
    err = expect_error(tmp_path, data, f"operands.A.{key}", f"has {len(strides)} entries")
    assert "'mk'" in err.problem


def test_stride_count_mismatch_contraction(tmp_path):
    data = conv_spec(operands={"A": {"strides": [120, 15, 1]}})  # nchw has 4 letters
    expect_error(tmp_path, data, "operands.A.strides", "has 3 entries but the operand has 4 dims ('nchw')")


def test_sizes_omit_a_letter(tmp_path):
    data = conv_spec()
    del data["sizes"]["c"]  # the summed letter
    err = expect_error(tmp_path, data, "sizes.c", "missing")
    assert "c:" in err.fix


def test_sizes_unknown_letter(tmp_path):
    data = conv_spec()
    data["sizes"]["z"] = 3
    expect_error(tmp_path, data, "sizes.z", "unknown key 'z'")


def test_contraction_without_sizes(tmp_path):
    data = conv_spec()
    del data["sizes"]
    expect_error(tmp_path, data, "sizes", "missing")


@pytest.mark.parametrize("expr", ["nchw kc->nkhw", "nc1w,kc->nk1w", "nchw,kc-nkhw", "", "  ", 5])
def test_malformed_contraction(tmp_path, expr):
    expect_error(tmp_path, conv_spec(contraction=expr), "contraction", "not of the form")


def test_output_letter_in_no_input(tmp_path):
    data = {"name": "x", "contraction": "ab,bc->acd", "sizes": {x: 3 for x in "abcd"}}
    err = expect_error(tmp_path, data, "contraction", "letter 'd' appears in C only")
    assert "numpy.einsum rejects it too" in err.fix


@pytest.mark.parametrize("expr,letter,op", [
    ("aab,bc->ac", "a", "A"),
    ("ab,bcb->ac", "b", "B"),
])
def test_letter_repeated_in_one_operand(tmp_path, expr, letter, op):
    data = {"name": "x", "contraction": expr, "sizes": {"a": 2, "b": 3, "c": 4}}
    err = expect_error(tmp_path, data, "contraction", f"letter '{letter}' appears twice in {op}")
    assert "diagonal" in err.problem and "diagonal" in err.fix


def test_letter_repeated_in_output(tmp_path):
    data = {"name": "x", "contraction": "ab,bc->acc", "sizes": {"a": 2, "b": 3, "c": 4}}
    err = expect_error(tmp_path, data, "contraction", "letter 'c' appears twice in C")
    assert "numpy.einsum rejects" in err.fix


def test_byte_stride_not_multiple_of_element(tmp_path):
    data = gemm_spec(dtype="f32", operands={"B": {"byte_strides": [24, 6]}})
    err = expect_error(tmp_path, data, "operands.B.byte_strides[1]",
                       "6 bytes is not a multiple of the 4-byte f32 element")
    assert "4" in err.fix


def test_byte_stride_checked_against_operand_dtype(tmp_path):
    # C is f32 while the spec is f16: 2-byte strides are fine for A but not for C.
    data = gemm_spec(operands={"A": {"byte_strides": [16, 2]},
                               "C": {"dtype": "f32", "byte_strides": [26, 2]}})
    expect_error(tmp_path, data, "operands.C.byte_strides[0]", "not a multiple of the 4-byte")


# ------------------------------------------------------------------------------------------------
# errors: aliased C


def test_c_stride_zero_is_aliased(tmp_path):
    data = gemm_spec(operands={"C": {"strides": [0, 1]}})
    err = expect_error(tmp_path, data, "operands.C.strides", "stride 0 on 'm' (size 4)")
    assert "non-zero" in err.fix


def test_c_stride_zero_on_size_one_dim_is_fine():
    spec = parse_spec(gemm_spec(gemm={"m": 1, "n": 6, "k": 8}, operands={"C": {"strides": [0, 1]}}))
    assert spec.C.strides == (0, 1)


def test_c_overlapping_strides(tmp_path):
    data = {"name": "x", "contraction": "ab,bc->ac", "sizes": {"a": 2, "b": 5, "c": 2},
            "operands": {"C": {"strides": [1, 1]}}}
    expect_error(tmp_path, data, "operands.C.strides", "share an address")


def test_c_overlapping_strides_partial(tmp_path):
    # n steps 3 elements but m (size 4, stride 1) reaches 3: C[m=3, n=0] and C[m=0, n=1] share address 3.
    data = gemm_spec(operands={"C": {"strides": [1, 3]}})
    expect_error(tmp_path, data, "operands.C.strides", "share an address")


def test_c_overlap_checked_on_byte_strides(tmp_path):
    data = gemm_spec(operands={"C": {"byte_strides": [2, 2]}})
    expect_error(tmp_path, data, "operands.C.byte_strides", "share an address")


@pytest.mark.parametrize("strides", [[0, 1], [1, 1], [1, 0]])
def test_stride_zero_and_overlap_are_legal_on_inputs(strides):
    spec = parse_spec(gemm_spec(operands={"A": {"strides": strides}, "B": {"strides": strides}}))
    assert spec.A.strides == tuple(strides) and spec.B.strides == tuple(strides)


def test_c_padded_and_permuted_is_not_aliased():
    spec = parse_spec(conv_spec(operands={"C": {"strides": [1000, 1, 160, 32]}}))
    assert spec.C.strides == (1000, 1, 160, 32)


# ------------------------------------------------------------------------------------------------
# errors: values out of range


def test_negative_size(tmp_path):
    err = expect_error(tmp_path, gemm_spec(gemm={"m": -3, "n": 4, "k": 4}), "gemm.m", "negative")
    assert ">= 1" in err.fix


def test_zero_size(tmp_path):
    data = conv_spec()
    data["sizes"]["k"] = 0
    err = expect_error(tmp_path, data, "sizes.k", "0 is less than 1")
    assert ">= 1" in err.fix


def test_zero_batch(tmp_path):
    expect_error(tmp_path, gemm_spec(gemm={"m": 4, "n": 4, "k": 4, "batch": 0}), "gemm.batch")


def test_negative_stride(tmp_path):
    err = expect_error(tmp_path, gemm_spec(operands={"A": {"strides": [8, -1]}}), "operands.A.strides[1]",
                       "negative")
    assert ">= 0" in err.fix


def test_negative_byte_stride(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"A": {"byte_strides": [-16, 2]}}),
                 "operands.A.byte_strides[0]", "negative")


def test_negative_offset(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"B": {"offset": -2}}), "operands.B.offset", "negative")


@pytest.mark.parametrize("dtype", ["f64", "F64", "int16", 16, "Halve", "float64"])
def test_unsupported_dtype(tmp_path, dtype):
    err = expect_error(tmp_path, gemm_spec(dtype=dtype), "dtype", "unsupported dtype")
    assert "f16" in err.fix and "bf16" in err.fix and "f32" in err.fix


def test_unsupported_operand_dtype(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"C": {"dtype": "f64"}}), "operands.C.dtype",
                 "unsupported dtype")


@pytest.mark.parametrize("accum", ["f16", "bf16", "f64"])
def test_unsupported_accum(tmp_path, accum):
    err = expect_error(tmp_path, gemm_spec(accum=accum), "accum", "unsupported accumulator type")
    assert "f32" in err.fix


@pytest.mark.parametrize("arch", ["sm_75", "sm_90", "sm_100a", "90a", 90])
def test_unsupported_arch(tmp_path, arch):
    err = expect_error(tmp_path, gemm_spec(arch=arch), "arch", "unsupported arch")
    for good in ("sm_80", "sm_86", "sm_89", "sm_90a"):
        assert good in err.fix


@pytest.mark.parametrize("name", ["1gemm", "my-gemm", "my gemm", "gémm", "", 42, None])
def test_name_not_an_identifier(tmp_path, name):
    err = expect_error(tmp_path, gemm_spec(name=name), "name", "is not a C identifier")
    assert "letters, digits and '_'" in err.fix


@pytest.mark.parametrize("name", ["int", "float", "while", "class", "template", "main", "def", "lambda"])
def test_name_reserved_word(tmp_path, name):
    err = expect_error(tmp_path, gemm_spec(name=name), "name", "reserved word")
    assert f"gemm_{name}" in err.fix


def test_name_with_trailing_newline(tmp_path):
    expect_error(tmp_path, gemm_spec(name="abc\n"), "name", "is not a C identifier")


@pytest.mark.parametrize("name", ["this", "operator", "private", "virtual", "nullptr", "true"])
def test_name_cpp_keyword(tmp_path, name):
    expect_error(tmp_path, gemm_spec(name=name), "name", "reserved word")


def test_both_gemm_and_contraction(tmp_path):
    data = conv_spec(gemm={"m": 4, "n": 4, "k": 4})
    err = expect_error(tmp_path, data, "gemm/contraction", "exactly one")
    assert "gemm:" in err.fix and "contraction:" in err.fix


def test_neither_gemm_nor_contraction(tmp_path):
    expect_error(tmp_path, {"name": "x", "dtype": "f16"}, "gemm/contraction", "exactly one")


def test_sizes_with_gemm(tmp_path):
    expect_error(tmp_path, gemm_spec(sizes={"m": 4}), "sizes", "goes with `contraction:`")


@pytest.mark.parametrize("layout", ["row", "col"])
def test_layout_with_contraction(tmp_path, layout):
    err = expect_error(tmp_path, conv_spec(operands={"B": {"layout": layout}}), "operands.B.layout",
                       "only works with the `gemm:` shorthand")
    assert "strides" in err.fix


def test_unknown_layout(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"A": {"layout": "column"}}), "operands.A.layout",
                 "unsupported layout")


def test_layout_and_strides_both(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"A": {"layout": "row", "strides": [8, 1]}}),
                 "operands.A.strides", "both `layout` and `strides`")


def test_a_and_b_dtypes_differ(tmp_path):
    # The key is the operand whose own dtype made them differ.
    err = expect_error(tmp_path, gemm_spec(operands={"A": {"dtype": "bf16"}}), "operands.A.dtype",
                       "A is bf16 but B is f16: one kernel multiplies one input type")
    assert "C, D and the epilogue's views may differ" in err.fix
    expect_error(tmp_path, gemm_spec(operands={"A": {"dtype": "bf16"}, "B": {"dtype": "f16"}}), "operands.B.dtype",
                 "A is bf16 but B is f16")


def test_c_dtype_may_differ():
    spec = parse_spec(gemm_spec(dtype="bf16", operands={"C": {"dtype": "f32"}}))
    assert (spec.A.dtype, spec.B.dtype, spec.C.dtype) == ("bf16", "bf16", "f32")


@pytest.mark.parametrize("align", [3, 6, 12, 24])
def test_align_not_power_of_two(tmp_path, align):
    err = expect_error(tmp_path, gemm_spec(operands={"A": {"align": align}}), "operands.A.align",
                       f"{align} is not a power of two")
    assert "16" in err.fix


@pytest.mark.parametrize("dtype,align", [("f16", 1), ("f32", 2), ("f32", 1)])
def test_align_smaller_than_element(tmp_path, dtype, align):
    expect_error(tmp_path, gemm_spec(dtype=dtype, operands={"B": {"align": align}}), "operands.B.align",
                 f">= the {DTYPE_BYTES[dtype]}-byte element")


def test_align_zero(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"B": {"align": 0}}), "operands.B.align")


# ------------------------------------------------------------------------------------------------
# errors: the file itself


def test_invalid_yaml_names_file_and_line(tmp_path):
    text = "name: bad\ngemm: {m: 4, n: 4, k: 4}\n  arch: sm_90a\n"
    err = expect_error(tmp_path, text, "line 3", "not valid YAML")
    assert "YAML" in err.fix


def test_invalid_yaml_unclosed_flow_mapping(tmp_path):
    text = "name: bad\ngemm: {m: 4, n: 4, k: 4}\noperands:\n  A: {strides: [4, 1]\n  B: {}\n"
    expect_error(tmp_path, text, "line 5", "not valid YAML")


def test_yaml_python_tag_is_rejected_not_executed(tmp_path):
    expect_error(tmp_path, "name: !!python/object/apply:os.getcwd []\n", "line 1", "not valid YAML")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert str(path) in msg and "(file)" in msg and "no such file" in msg and "Fix: " in msg


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path)
    assert str(tmp_path) in str(info.value) and "directory" in str(info.value)


@pytest.mark.parametrize("text", ["", "\n# just a comment\n", "{}\n"])
def test_empty_file(tmp_path, text):
    err = expect_error(tmp_path, text, "(top)", "empty")
    assert "name:" in err.fix


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "hello\n"])
def test_top_level_not_a_mapping(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert "expected a mapping" in err.problem
    assert str(path) in str(err) and "Fix: " in str(err)
    assert err.key.strip(), str(err)  # some key, e.g. "(top)", must be named
    assert "write  as" not in err.fix


def test_non_utf8_file(tmp_path):
    path = tmp_path / "bad_spec.yaml"
    path.write_bytes(b"name: g\xff\xfe\ngemm: {m: 4, n: 4, k: 4}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "Fix: " in str(info.value)


@pytest.mark.parametrize("text,key,lines", [
    ("name: g\nname: h\ngemm: {m: 4, n: 4, k: 4}\n", "name", "on lines 1 and 2"),
    ("name: g\ngemm: {m: 4, n: 4, k: 4, m: 8}\n", "gemm.m", "on line 2"),
    ("name: g\ngemm: {m: 4, n: 4, k: 4}\noperands:\n  A:\n    layout: row\n    layout: col\n",
     "operands.A.layout", "on lines 5 and 6"),
    ("name: g\ngemm: {m: 4, n: 4, k: 4}\nepilogue:\n  - bias: {letters: n}\n  - bias: {letters: n, letters: m}\n",
     "epilogue[1].bias.letters", "on line 5"),
])
def test_a_key_given_twice_is_an_error_at_any_depth(tmp_path, text, key, lines):
    err = expect_error(tmp_path, text, key, "is given twice " + lines)
    assert "keep one" in err.fix


def test_yaml_merge_keys_and_anchors_are_not_duplicates(tmp_path):
    text = ("name: g\ngemm: {m: 4, n: 4, k: 4}\noperands:\n  A: &dense {layout: row, align: 16}\n"
            "  B: {<<: *dense, layout: col}\n  C: *dense\n")
    spec = load_spec(write(tmp_path, text))
    assert (spec.A.align, spec.B.align, spec.C.align) == (16, 16, 16) and spec.B.strides == (1, 4)


@pytest.mark.parametrize("doc,key", [
    (gemm_spec(gemm={"m": 0, "n": 4, "k": 4}), "gemm.m"),
    (gemm_spec(gemm={"m": 4, "n": "4k", "k": 4}), "gemm.n"),
    (conv_spec(sizes={"n": 2, "c": 8, "h": 3.5, "w": 5, "k": 16}), "sizes.h"),
])
def test_size_errors_name_the_key_and_show_a_size(tmp_path, doc, key):
    err = expect_error(tmp_path, doc, key)
    assert f"`{key.rpartition('.')[2]}: 128`" in err.fix and ">= 1" in err.fix


@pytest.mark.parametrize("batch", ["b", "B", 2.0])
def test_gemm_batch_is_an_integer_count(tmp_path, batch):
    err = expect_error(tmp_path, gemm_spec(gemm={"m": 4, "n": 4, "k": 4, "batch": batch}), "gemm.batch",
                       "expected an integer count of batches")
    assert "`batch: 8`" in err.fix and "always b" in err.fix


def test_size_key_names_the_key_that_sizes_a_letter():
    gemm = parse_spec(gemm_spec(gemm={"m": 4, "n": 4, "k": 4, "batch": 2}))
    assert [gemm.size_key(x) for x in "bmnk"] == ["gemm.batch", "gemm.m", "gemm.n", "gemm.k"]
    assert parse_spec(conv_spec()).size_key("h") == "sizes.h"


def test_negative_strides_are_refused_with_the_reason(tmp_path):
    err = expect_error(tmp_path, gemm_spec(operands={"B": {"strides": [-6, 1]}}), "operands.B.strides[0]",
                       "-6 is negative: a view here walks forwards from its base pointer")
    assert "flipped copy" in err.fix


# ------------------------------------------------------------------------------------------------
# views far larger than any GPU


def test_views_far_past_the_largest_gpu_memory_get_a_warning():
    spec = parse_spec(gemm_spec(gemm={"m": 2**20, "n": 2**20, "k": 2**16}))  # C alone is 2.2 TB of f16
    (warning,) = spec.warnings
    assert "2.47 TB" in warning and "C 2.2 TB" in warning and "141 GB" in warning
    assert "gemm.m = 1048576, gemm.n = 1048576" in warning
    assert spec == parse_spec(spec.to_dict())  # a warning is provenance, like a note


def test_the_warning_counts_every_view_and_its_padding():
    # Dense, the views fit (A and B 2 x 17 GB, C 17 GB); C's padding of 20x its row makes them pass 282 GB.
    doc = gemm_spec(gemm={"m": 92_000, "n": 92_000, "k": 92_000})
    assert parse_spec(doc).warnings == ()
    doc["operands"] = {"C": {"strides": [92_000 * 20, 1]}}
    assert parse_spec(doc).warnings


def test_no_example_spec_gets_a_warning():
    assert all(load_spec(path).warnings == () for path in SPEC_FILES)


def test_a_view_past_a_64_bit_byte_offset_is_refused(tmp_path):
    err = expect_error(tmp_path, gemm_spec(gemm={"m": 2**40, "n": 2**40, "k": 4}), "gemm.m",
                       "past a 64-bit byte offset")
    assert "split the problem" in err.fix


def _readme_spec_examples() -> list[dict]:
    """The YAML blocks of the README's "## A spec" section; an `epilogue:` fragment goes on a small GEMM."""
    readme = (SPECS_DIR.parent / "README.md").read_text()
    section = readme[readme.index("## A spec"):readme.index("## Commands")]
    docs = [yaml.safe_load(block.split("```", 1)[0]) for block in section.split("```yaml\n")[1:]]
    return [doc if "name" in doc else {"name": "frag", "gemm": {"m": 4, "n": 6, "k": 8}, **doc} for doc in docs]


def test_every_example_in_the_readme_spec_section_parses():
    docs = _readme_spec_examples()
    assert len(docs) >= 3 and any("epilogue" in doc for doc in docs)
    for doc in docs:
        spec = parse_spec(doc, "README.md")
        assert spec.warnings == ()


def test_c_overlap_names_the_key_the_user_wrote(tmp_path):
    expect_error(tmp_path, gemm_spec(operands={"C": {"byte_strides": [2, 2]}}), "operands.C.byte_strides")


# ------------------------------------------------------------------------------------------------
# positive: strides from the shorthand, byte strides, defaults


def _shorthand(batch: int | None, layouts: dict[str, str]) -> Spec:
    gemm = {"m": 3, "n": 5, "k": 7}
    if batch is not None:
        gemm["batch"] = batch
    operands = {op: {"layout": lay} for op, lay in layouts.items()}
    return parse_spec({"name": "g", "gemm": gemm, "operands": operands})


def test_gemm_row_layout_strides():
    spec = _shorthand(None, {"A": "row", "B": "row", "C": "row"})
    assert spec.contraction == "mk,kn->mn"
    assert spec.sizes == {"m": 3, "n": 5, "k": 7}
    assert (spec.A.letters, spec.A.sizes, spec.A.strides) == ("mk", (3, 7), (7, 1))
    assert (spec.B.letters, spec.B.sizes, spec.B.strides) == ("kn", (7, 5), (5, 1))
    assert (spec.C.letters, spec.C.sizes, spec.C.strides) == ("mn", (3, 5), (5, 1))
    assert spec.shorthand == "gemm"


def test_gemm_col_layout_strides():
    spec = _shorthand(None, {"A": "col", "B": "col", "C": "col"})
    assert spec.A.strides == (1, 3)
    assert spec.B.strides == (1, 7)
    assert spec.C.strides == (1, 3)


def test_gemm_batched_layout_strides():
    spec = _shorthand(2, {"A": "row", "B": "col", "C": "col"})
    assert spec.contraction == "bmk,bkn->bmn"
    assert spec.sizes == {"b": 2, "m": 3, "n": 5, "k": 7}
    assert (spec.A.letters, spec.A.sizes, spec.A.strides) == ("bmk", (2, 3, 7), (21, 7, 1))
    assert (spec.B.letters, spec.B.sizes, spec.B.strides) == ("bkn", (2, 7, 5), (35, 1, 7))
    assert (spec.C.letters, spec.C.sizes, spec.C.strides) == ("bmn", (2, 3, 5), (15, 1, 3))
    spec = _shorthand(2, {"A": "col", "B": "row", "C": "row"})
    assert spec.A.strides == (21, 1, 3)
    assert spec.B.strides == (35, 5, 1)
    assert spec.C.strides == (15, 5, 1)


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("batch", [None, 3])
def test_layout_strides_are_a_dense_bijection(layout, batch):
    """Every layout maps the index box onto 0..size-1 exactly once."""
    spec = _shorthand(batch, {op: layout for op in "ABC"})
    for op in spec.operands:
        addrs = sorted(sum(i * s for i, s in zip(idx, op.strides, strict=True))
                       for idx in itertools.product(*(range(n) for n in op.sizes)))
        assert addrs == list(range(len(addrs)))


def test_byte_strides_convert_to_element_strides():
    spec = parse_spec(gemm_spec(dtype="f32", operands={"A": {"byte_strides": [64, 4]},
                                                       "B": {"byte_strides": [0, 8]},
                                                       "C": {"dtype": "f32", "byte_strides": [4, 16]}}))
    assert spec.A.strides == (16, 1)
    assert spec.B.strides == (0, 2)
    assert spec.C.strides == (1, 4)
    spec = parse_spec(gemm_spec(dtype="bf16", operands={"A": {"byte_strides": [18, 2]},
                                                        "C": {"dtype": "f32", "byte_strides": [24, 4]}}))
    assert spec.A.strides == (9, 1)
    assert spec.C.strides == (6, 1)


def test_strides_and_byte_strides_agree():
    a = parse_spec(conv_spec(dtype="bf16", operands={"A": {"strides": [200, 25, 5, 1]}}))
    b = parse_spec(conv_spec(dtype="bf16", operands={"A": {"byte_strides": [400, 50, 10, 2]}}))
    assert a == b


def test_defaults_gemm():
    spec = parse_spec({"name": "g", "gemm": {"m": 4, "n": 6, "k": 8}}, "x.yaml")
    assert spec.name == "g" and spec.source == "x.yaml"
    assert spec.arch == "sm_90a"
    assert spec.accum == "f32"
    assert spec.alpha == 1.0 and spec.beta == 0.0
    assert isinstance(spec.alpha, float) and isinstance(spec.beta, float)
    for op in spec.operands:
        assert op.dtype == "f16" and op.elem_bytes == 2
        assert op.align == 2
        assert op.offset == 0
    assert spec.A.strides == (8, 1) and spec.B.strides == (6, 1) and spec.C.strides == (6, 1)


def test_defaults_follow_operand_dtype():
    spec = parse_spec(gemm_spec(dtype="bf16", operands={"C": {"dtype": "f32"}}))
    assert (spec.A.align, spec.B.align, spec.C.align) == (2, 2, 4)
    spec = parse_spec(gemm_spec(dtype="f32"))
    assert all(op.dtype == "f32" and op.align == 4 for op in spec.operands)


def test_defaults_contraction_dense_in_letter_order():
    spec = parse_spec(conv_spec())  # n2 c8 h3 w5 k16
    assert spec.contraction == "nchw,kc->nkhw"
    assert spec.A.strides == (8 * 3 * 5, 3 * 5, 5, 1)
    assert spec.B.strides == (8, 1)
    assert spec.C.strides == (16 * 3 * 5, 3 * 5, 5, 1)
    assert spec.shorthand == "contraction"


def test_contraction_whitespace_is_normalised():
    spec = parse_spec(conv_spec(contraction="  nchw , kc ->  nkhw "))
    assert spec.contraction == "nchw,kc->nkhw"


def test_explicit_values_kept():
    spec = parse_spec(gemm_spec(arch="sm_80", dtype="bf16", alpha=2, beta=-0.5,
                                operands={"A": {"offset": 3, "align": 16}}))
    assert spec.arch == "sm_80"
    assert spec.alpha == 2.0 and isinstance(spec.alpha, float) and spec.beta == -0.5
    assert spec.A.offset == 3 and spec.A.align == 16 and spec.A.dtype == "bf16"


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_every_example_spec_loads(path):
    spec = load_spec(path)
    assert spec.name == path.stem
    assert spec.source == str(path)
    for op in spec.operands:
        assert len(op.letters) == len(op.sizes) == len(op.strides)
        assert op.sizes == tuple(spec.sizes[x] for x in op.letters)


def test_example_specs_exist():
    assert len(SPEC_FILES) >= 8


def test_example_conv_spec_values():
    spec = load_spec(SPECS_DIR / "conv1x1_nchw.yaml")
    assert spec.A.strides == (802816, 3136, 56, 1)
    assert spec.B.strides == (256, 1)  # byte_strides [512, 2] in bf16
    assert spec.C.strides == (512 * 3136, 3136, 56, 1)
    assert spec.A.dtype == spec.B.dtype == spec.C.dtype == "bf16"


# ------------------------------------------------------------------------------------------------
# to_dict round trip


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_to_dict_round_trips(path):
    spec = load_spec(path)
    again = parse_spec(spec.to_dict(), "elsewhere.yaml")
    assert again == spec


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_to_dict_is_plain_yaml_in_contraction_form(path):
    spec = load_spec(path)
    d = spec.to_dict()
    assert yaml.safe_load(yaml.safe_dump(d)) == d  # plain YAML-able data
    assert "gemm" not in d and d["contraction"] == spec.contraction
    again = parse_spec(d, "elsewhere.yaml")
    assert again.source == "elsewhere.yaml" and again.shorthand == "contraction"
    assert again == spec  # source and shorthand are provenance, not compared


def test_to_dict_of_defaults_is_explicit():
    d = parse_spec(gemm_spec(operands={"C": {"dtype": "f32", "offset": 5}})).to_dict()
    assert d["contraction"] == "mk,kn->mn"
    assert d["arch"] == "sm_90a" and d["accum"] == "f32" and d["alpha"] == 1.0 and d["beta"] == 0.0
    assert d["operands"]["C"] == {"strides": [6, 1], "offset": 5, "dtype": "f32", "align": 4}
    assert d["operands"]["A"] == {"strides": [8, 1], "offset": 0, "dtype": "f16", "align": 2}


# ------------------------------------------------------------------------------------------------
# OperandView.span


def _brute_span(op: OperandView) -> int:
    return op.offset + max(sum(i * s for i, s in zip(idx, op.strides, strict=True))
                           for idx in itertools.product(*(range(n) for n in op.sizes))) + 1


def test_span_examples():
    view = OperandView("A", "mk", (2, 3), (10, 1), 5, "f16", 2)
    assert view.span == 5 + 10 + 2 + 1
    assert OperandView("B", "kn", (4, 3), (0, 1), 0, "f16", 2).span == 3  # broadcast
    assert OperandView("B", "kn", (1, 1), (7, 9), 4, "f32", 4).span == 5  # a single element
    assert OperandView("C", "mn", (3, 5), (1, 3), 0, "f32", 4).span == 15  # dense col


def test_span_matches_brute_force():
    specs = [load_spec(SPECS_DIR / "nhwc_padded_f32.yaml"),
             parse_spec(gemm_spec(gemm={"m": 5, "n": 6, "k": 7, "batch": 3},
                                  operands={"B": {"strides": [0, 9, 1], "offset": 2}})),
             parse_spec(conv_spec(operands={"A": {"strides": [300, 1, 90, 9], "offset": 7},
                                            "C": {"strides": [1000, 1, 160, 32]}}))]
    checked = 0
    for spec in specs:
        for op in spec.operands:
            total = 1
            for n in op.sizes:
                total *= n
            if total <= 50_000:
                assert op.span == _brute_span(op), (spec.name, op.name)
                checked += 1
    assert checked >= 9


def test_the_spec_package_exports_its_names_and_keeps_each_module_short():
    """`from dgemm_cli.spec import X` reaches every public name of the stage; no module of it passes 600 lines."""
    import dgemm_cli.spec as spec_package

    missing = [name for name in spec_package.__all__ if not hasattr(spec_package, name)]
    assert not missing
    used = {"Spec", "OperandView", "EpilogueStep", "load_spec", "parse_spec", "DTYPE_BYTES", "DTYPE_ALIASES",
            "ACTIVATIONS"}  # what dgemm_cli, tests and tools import from the stage
    assert used <= set(spec_package.__all__)
    package_dir = Path(spec_package.__file__).parent
    long = {p.name: n for p in package_dir.glob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert not long

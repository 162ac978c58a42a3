"""renderers/problems.py: a .cu's kernels that see the same problem share one `struct Problem` (no GPU, no nvcc)."""
from __future__ import annotations

from dgemm_cli.renderers import Body
from dgemm_cli.renderers.problems import share_problems
from dgemm_cli.spec import load_spec

from .conftest import REPO
from .test_render import render

PROBLEM = "struct Problem {{\n  static constexpr int M = {m};\n}};\n\nstruct Traits : Problem {{\n"
PLAN = "  static constexpr int BM = 16;\n};\n\ncudaError_t launch();\n"


def _body(namespace: str, m: int, indent: str = "") -> Body:
    text = "\n".join(f"{indent}{line}" if line else line for line in (PROBLEM.format(m=m) + PLAN).split("\n"))
    return Body(namespace=namespace, text=text, title="", decisions=())


def test_the_second_kernel_of_a_problem_names_the_first_ones():
    out = share_problems([_body("m5_8_tcgemv", 8), _body("m5_8_cta", 8)])
    assert out[0].text == _body("m5_8_tcgemv", 8).text  # the first declares it
    assert out[1].text.startswith("using Problem = m5_8_tcgemv::Problem;  // m5_8_tcgemv's views, sizes and store\n"
                                  "\nstruct Traits : Problem {\n  static constexpr int BM = 16;")


def test_a_problem_no_other_kernel_shares_goes_back_into_its_traits():
    out = share_problems([_body("m1_gemv", 1), _body("m9_64_cta", 64)])
    assert [b.text for b in out] == [
        f"struct Traits {{\n  static constexpr int M = {m};\n\n  static constexpr int BM = 16;\n}};\n\n"
        "cudaError_t launch();\n" for m in (1, 64)]


def test_bucket_templates_name_the_problem_through_the_template_at_the_same_rows():
    out = share_problems([_body("m2_4_tcgemv", 4, "  "), _body("m2_4_cta", 4, "  "), _body("m2_4_gemv", 4)])
    assert out[1].text.startswith("  using Problem = typename m2_4_tcgemv::Bucket<ROWS>::Problem;")
    assert out[2].text.startswith("struct Traits {\n")  # not inside a template: another problem's text


def test_decode_dynamic_says_each_problem_once():
    spec = load_spec(REPO / "specs" / "decode_dynamic.yaml")
    cu = render(spec, "sm_90a")[f"{spec.name}.cu"]
    assert cu.count("struct Problem {") == 2  # m in 2..4 (a template) and m in 5..8; the others hold their own
    assert "using Problem = m5_8_tcgemv::Problem;" in cu
    assert "using Problem = typename m2_4_tcgemv::Bucket<ROWS>::Problem;" in cu
    assert len(cu.splitlines()) < 600

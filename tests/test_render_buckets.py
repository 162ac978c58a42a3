"""renderers/buckets.py: one-size buckets folded into one template (no GPU, no nvcc)."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from dgemm_cli.renderers import Body
from dgemm_cli.renderers.buckets import _join_sizes, fold, merged_routes, rows_template

# Pieces of traits text: words, punctuation and integer literals, some of which are the bucket's row count.
_WORD = st.sampled_from(["M", " = ", ", ", "dg::Seg<", ">", "N", "; // m[", "]", "\n  ", "1.5f", "8u", "x2"])


@given(st.lists(st.one_of(_WORD, st.integers(0, 99).map(lambda n: f" {n} "), st.just(" ROWS ")), max_size=30),
       st.lists(st.integers(1, 64), min_size=2, max_size=5, unique=True))
def test_a_template_instantiated_at_each_bucket_gives_back_its_text(pieces, rows):
    """Texts made from one pattern, ROWS standing for each bucket's row count: the template found, with ROWS
    replaced by a bucket's count, is that bucket's text exactly."""
    texts = ["".join(f" {r} " if p == " ROWS " else p for p in pieces) for r in rows]
    template = rows_template(texts, rows)
    assert template is not None
    for text, r in zip(texts, rows):
        assert re.sub(r"\bROWS\b", str(r), template) == text


def test_texts_that_differ_beyond_the_row_count_do_not_fold():
    assert rows_template(["M = 2, N = 8;", "M = 3, N = 9;"], [2, 3]) is None  # N differs, not as M does
    assert rows_template(["M = 2; bool x = true;", "M = 3; bool x = false;"], [2, 3]) is None
    assert rows_template(["M = 2, K = 2;", "M = 3, K = 2;"], [2, 3]) == "M = ROWS, K = 2;"


def _route(rows: int | None, label: str, text: str, smem: int = 1024) -> dict:
    body = Body(namespace=f"{label}_tcgemv", text=text, title="tcgemv: a plan", decisions=("tokens = 8",))
    return {"rows": rows, "label": label, "bodies": [body], "kernel_smem": {body.namespace: smem},
            "span": (rows, rows) if rows else (5, 8), "summary": "tcgemv: a plan", "dispatch": None}


TRAITS = "struct Traits {\n  using index_t = int;\n  static constexpr index_t M = {m};\n  struct Epilogue {{}};\n}};\n"
REST = ("cudaError_t launch(float alpha) {\n"
        "  return dg::tcgemv::launch<Traits>(Traits::M, Traits::Epilogue{}, alpha);\n}\n")


def test_one_size_buckets_fold_into_a_bucket_template():
    routes = [_route(m, f"m{m}", TRAITS.replace("{m}", str(m)).replace("{{", "{").replace("}}", "}") + REST)
              for m in (2, 3, 4)] + [_route(None, "m5_8", "struct Traits {\n};\n")]
    namespaces, smem, callee = fold(routes, "m")
    assert [b.namespace for b in namespaces] == ["m2_4_tcgemv", "m5_8_tcgemv"]
    assert smem == {"m2_4_tcgemv": 1024}
    assert callee == {f"m{m}_tcgemv": f"m2_4_tcgemv::Bucket<{m}>" for m in (2, 3, 4)}
    text = namespaces[0].text
    assert "template <int ROWS>\nstruct Bucket {\n  struct Traits {" in text and "M = ROWS;" in text
    # The launcher is a static member; the traits' types are named as dependent types outside the traits.
    assert "  static cudaError_t launch(float alpha) {" in text
    assert "typename Traits::Epilogue{}" in text and "(Traits::M," in text and "typename Traits::M" not in text


def test_buckets_that_differ_beyond_the_rows_or_in_shared_memory_stay_apart():
    text = TRAITS.replace("{{", "{").replace("}}", "}") + REST
    routes = [_route(2, "m2", text.replace("{m}", "2")), _route(3, "m3", text.replace("{m}", "3") + "// more\n")]
    assert fold(routes, "m")[2] == {}
    routes = [_route(2, "m2", text.replace("{m}", "2"), 1024), _route(3, "m3", text.replace("{m}", "3"), 2048)]
    assert fold(routes, "m")[2] == {}


def test_sizes_and_dispatch_lines_are_joined():
    assert _join_sizes("m", [(2, 2), (3, 3), (4, 4), (5, 8)]) == "m in 2..8"
    assert _join_sizes("m", [(2, 2), (4, 4)]) == "m = 2, 4"
    assert _join_sizes("m", [(1, 1), (9, 64)]) == "m in 1, 9..64"
    lines = merged_routes([_route(2, "m2", ""), _route(3, "m3", ""), _route(None, "m5_8", "")], "m")
    assert [(x["sizes"], x["text"]) for x in lines] == [("m in 2..8", "tcgemv: a plan")]


@given(st.lists(st.one_of(_WORD, st.integers(0, 99).map(str), st.just("ROWS")), max_size=30),
       st.lists(st.integers(1, 64), min_size=2, max_size=5, unique=True))
def test_a_fold_never_changes_a_bucket(pieces, rows):
    """Row counts glued to names or floats (`x2`, `M2`) are not literals: such texts may not fold, but any template
    found gives back every bucket's text."""
    texts = ["".join(str(r) if p == "ROWS" else p for p in pieces) for r in rows]
    template = rows_template(texts, rows)
    if template is not None:
        for text, r in zip(texts, rows):
            assert re.sub(r"\bROWS\b", str(r), template) == text

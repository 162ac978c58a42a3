"""The `fp8_cta` family (docs/design/fp8.md): what it takes that fp8_hopper refuses, its promotion interval against
the scales' k blocks, how it indexes the scale views (checked against numpy on the views themselves), and what it
renders (pure; the kernel's GPU checks are verify's)."""

from __future__ import annotations

import numpy as np
import pytest

from dgemm_cli.arch import get_arch
from dgemm_cli.baseline import plan_baseline
from dgemm_cli.explain import explain_text
from dgemm_cli.families.fp8_cta import Fp8CtaPlan, gates
from dgemm_cli.families.fp8_cta.scales import scale_roles
from dgemm_cli.plan import family_gates, make_plan
from dgemm_cli.render import render_sources
from dgemm_cli.spec import load_spec, parse_spec
from dgemm_cli.views import analyse

H200 = get_arch("sm_90a")
ADA = get_arch("sm_89")


def _spec(scales, contraction="mk,nk->mn", sizes=None, a=None, b=None, c=None, **top) -> dict:
    spec = {"name": "f8c", "arch": "sm_90a", "dtype": "e4m3", "contraction": contraction,
            "sizes": sizes or {"m": 200, "n": 136, "k": 1000},
            "operands": {"A": a or {}, "B": b or {}, "C": c or {"dtype": "bf16"}}, "scales": scales}
    spec.update(top)
    return spec


def _plan(data: dict, arch=H200) -> Fp8CtaPlan:
    plan = make_plan(analyse(parse_spec(data, "f8c.yaml")), arch)
    assert plan.family == "fp8_cta", plan.family
    return plan.primary


def test_sm_89_plans_fp8_cta_and_fp8_hopper_says_why_not():
    data = _spec({"A": {"block": {"k": 128}}, "B": {"block": {"n": 128, "k": 128}}})
    plan = _plan(data, ADA)
    assert plan.block_k in (32, 64, 128) and plan.promotion_k == plan.block_k
    gated = family_gates(analyse(parse_spec(data, "f8c.yaml")), ADA)
    assert gated["fp8_cta"] == []
    assert "fp8_cta runs e4m3 there" in gated["fp8_hopper"][0][1]


@pytest.mark.parametrize("name, why", [
    ("fp8_conv_nchw_per_channel", "one segment a role"),  # m is (n, h, w): A is m-contiguous
    ("fp8_batched_mn_major", "one segment a role"),  # a batch, both operands mn-contiguous, k blocks of 64
    ("fp8_misaligned_rows", "TMA A"),  # rows 1000 bytes apart, 3 bytes past alignment
])
def test_the_views_fp8_hopper_refuses_plan_fp8_cta(name, why):
    views = analyse(load_spec(f"specs/fp8/{name}.yaml"))
    plan = make_plan(views, H200)
    assert plan.family == "fp8_cta"
    assert any(c.startswith(why) for c, _ in family_gates(views, H200)["fp8_hopper"])


def test_an_mn_contiguous_operand_is_gathered_into_k_major_tiles():
    plan = _plan(_spec({"A": {"per": "tensor"}, "B": {"per": "channel"}}, contraction="km,kn->mn",
                       sizes={"m": 256, "n": 256, "k": 512}))
    assert plan.a.smem_inner == "k" and plan.b.smem_inner == "k"
    assert plan.a.kind == "gather" and plan.b.kind == "gather"
    assert plan.min_blocks_per_sm == 1


def test_a_k_contiguous_16_byte_aligned_operand_is_copied_16_bytes_at_a_time():
    plan = _plan(_spec({"A": {"block": {"k": 128}}, "B": {"block": {"k": 128}}},
                       a={"strides": [1024, 1], "align": 16}, b={"strides": [1024, 1], "align": 16},
                       sizes={"m": 512, "n": 512, "k": 1024}, plan={"family": "fp8_cta"}))
    assert (plan.a.kind, plan.a.vector_elems, plan.a.runtime_align) == ("cp_async", 16, 0)


@pytest.mark.parametrize("k_block, allowed", [(32, {32}), (64, {32, 64}), (128, {32, 64, 128}), (256, {32, 64, 128})])
def test_the_k_tile_divides_the_scales_k_blocks(k_block, allowed):
    data = _spec({"A": {"block": {"k": k_block}}, "B": {"per": "tensor"}}, sizes={"m": 256, "n": 256, "k": 1024})
    plan = _plan(data)
    assert plan.block_k in allowed
    sa = plan.scales[0]
    assert sa.k_varying and sa.k_period == k_block


def test_k_blocks_finer_than_32_are_refused_with_the_reason():
    views = analyse(parse_spec(_spec({"A": {"block": {"k": 16}}, "B": {"per": "tensor"}}), "f8c.yaml"))
    why = dict(gates(views, H200))["scale k blocks"]
    assert "A_scales changes every 16 k" in why and "32, 64, 128" in why


def test_the_period_of_a_scale_blocked_on_an_outer_k_letter():
    """k = (c, r) with r inner (3) and one scale for all of r: blocks of 128 along c change the scale every 3 * 128
    flat k, and c's wrap at 3 * 256 is the end of k (c is the outermost letter). Without `r: all`, r's blocks of 1
    change it at every k, which no k-tile can promote."""
    data = _spec({"A": {"block": {"c": 128, "r": "all"}}, "B": {"per": "tensor"}}, contraction="mcr,ncr->mn",
                 sizes={"m": 64, "n": 64, "c": 256, "r": 3})
    views = analyse(parse_spec(data, "f8c.yaml"))
    sa = scale_roles(views, views.spec.scales[0])
    assert sa.k_period == 384
    assert _plan(data).block_k in (32, 64, 128)
    data["scales"]["A"]["block"].pop("r")
    views = analyse(parse_spec(data, "f8c.yaml"))
    assert "A_scales changes every 1 k" in dict(gates(views, H200))["scale k blocks"]


def _offset(letters, i: int) -> int:
    """dg/fp8_cta.cuh's ScaleRole::offset, as written there: innermost letter first."""
    out = 0
    for n, x in enumerate(letters):
        last = n == len(letters) - 1
        idx = i if last else i % x.size
        out += (idx // x.block) * x.stride if x.stride else 0
        i //= x.size
    return out


@pytest.mark.parametrize("data", [
    _spec({"A": {"block": {"m": 2, "k": 128}, "strides": [75, 1, 3]}, "B": {"block": {"n": 64, "k": 64}, "offset": 3}},
          contraction="bkm,bkn->bmn", sizes={"b": 3, "m": 50, "n": 70, "k": 300}),
    _spec({"A": {"block": {"c": 64}}, "B": {"per": "channel"}}, contraction="nchw,kc->nkhw",
          sizes={"n": 2, "c": 130, "h": 5, "w": 7, "k": 40}),
])
def test_the_scale_roles_address_what_numpy_indexes(data):
    """Every (batch, row or column, k) index of the problem: the offset the kernel forms from the ScaleRoles equals the
    scale view's element at the operand's letters divided by their blocks (numpy over the view's strides)."""
    spec = parse_spec(data, "f8c.yaml")
    views = analyse(spec)
    for sc in spec.scales:
        roles = scale_roles(views, sc)
        view = sc.view
        blocks = dict(sc.blocks)
        operand = spec.operand(sc.operand)
        flat_letters = {r: [x for seg in views.roles[r].segments for x in seg.letters]  # outer -> inner
                        for r in ("batch", "m" if sc.operand == "A" else "n", "k")}
        buffer = np.arange(view.span)
        scale = np.lib.stride_tricks.as_strided(buffer[view.offset:], view.sizes,
                                                [s * buffer.itemsize for s in view.strides])
        for role, letters in roles.roles:
            outer_first = flat_letters[role]
            sizes = [spec.sizes[x] for x in outer_first]
            for flat in range(int(np.prod(sizes)) if sizes else 1):
                idx = dict(zip(outer_first, np.unravel_index(flat, sizes))) if sizes else {}
                at = tuple(idx.get(x, 0) // blocks[x] if x in idx else 0 for x in view.letters)
                want = scale[at] - view.offset if view.letters else 0
                # the role's part alone: the other letters of the view at 0
                assert _offset(letters, flat) == want, (sc.operand, role, flat)
        assert set(operand.letters) >= set(view.letters)


def test_explain_and_the_kernel_state_the_promotion_and_the_scales():
    spec = load_spec("specs/fp8/fp8_batched_mn_major.yaml")
    text = explain_text(spec, H200)
    assert "promotion: every 64 k (one k-tile)" in text
    assert "A_scales[bkm] f32, one scale a block of 1 b x 1 m x 64 k: each thread loads the scales of its rows " \
        "each k-tile" in text
    views = analyse(spec)
    plan = make_plan(views, H200)
    sources = render_sources(spec, views, plan, plan_baseline(views), H200)
    cu = sources[f"{spec.name}.cu"]
    assert '#include "dg/fp8_cta.cuh"' in cu and "mma.sync m16n8k32, e4m3" in cu
    assert "static constexpr bool K_VARYING = true;" in cu
    assert "dg::fp8_cta::ScaleRole<index_t, dg::fp8_cta::ScaleSeg<3, 1, " in cu  # the batch of A's scales


@pytest.mark.parametrize("arch", [H200, ADA], ids=lambda a: a.name)
def test_every_fp8_views_random_draw_plans_fp8_cta_and_reaches_its_paths(arch):
    """`random-specs --fp8-views-share 1`: each draw parses and plans with fp8_cta (fp8_hopper refuses every one of
    them on sm_90a); the draws reach both loaders, every k-tile, batches, several letters a role and every scaling
    mode."""
    from dgemm_cli.randspec import random_specs

    loaders, k_tiles, batched, segments, modes, fallbacks = set(), set(), 0, 0, set(), 0
    for data in random_specs(150, 5, fp8_views_share=1.0):
        views = analyse(parse_spec(data, "f8c.yaml"))
        plan = make_plan(views, arch)
        assert plan.family == "fp8_cta", (data["name"], family_gates(views, arch)["fp8_cta"])
        p = plan.primary
        loaders |= {p.a.kind, p.b.kind}
        fallbacks += bool(p.runtime_dispatch)
        k_tiles.add(p.block_k)
        batched += views.batch > 1
        segments += len(views.roles["m"].segments) > 1
        modes |= {s.mode().split(":")[0].split(" (")[0] for s in p.scales}
    assert loaders == {"cp_async", "gather"} and k_tiles == {32, 64, 128}
    assert batched > 10 and segments > 5 and fallbacks > 3
    assert any("per tensor" in m or "all of" in m for m in modes) and any("x 32 k" in m for m in modes)

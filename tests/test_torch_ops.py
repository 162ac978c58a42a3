"""deepgemm.torch end to end: each test runs on the CPU (the host kernels, built with the host compiler) and, on a
GPU, on CUDA (nvcc). The reference is torch's own einsum / linear / autograd, which shares nothing with deepgemm's
indexing. Skipped where torch is not installed (`pip install ".[torch]"`; CI installs the CPU build)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings

torch = pytest.importorskip("torch")

import deepgemm.torch as dgt  # noqa: E402  (after the skip: it imports torch)
from deepgemm import KernelCallError  # noqa: E402
from deepgemm.torch import launch  # noqa: E402

from .test_torch_problem import calls  # noqa: E402  (after the skip: it imports deepgemm.torch)

pytestmark = pytest.mark.slow

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]
# Relative Frobenius error allowed against torch in f32: both sum in f32, in other orders, over K <= 64.
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}


@pytest.fixture(autouse=True, scope="module")
def kernel_cache(tmp_path_factory):
    """Every kernel of this module in a cache of its own, so the user's is untouched."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPGEMM_CACHE", str(tmp_path_factory.mktemp("kernels")))
        yield


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return request.param


def close(got, want, dtype):
    assert not torch.isnan(got).any(), "NaN in the result"
    err = ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()
    assert err <= TOLERANCE[dtype], f"relative error {err:.3g} > {TOLERANCE[dtype]}"


def rand(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, dtype=torch.float32, device=device).to(dtype)


# ------------------------------------------------------------------------------------- einsum over views

def _cases(device):
    g = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(device)

    q, k = r(2, 9, 4, 16), r(2, 11, 4, 16)
    return [
        ("mk,kn->mn", r(13, 24), r(24, 7)),
        ("mk,nk->mn", r(64, 40)[:, ::2], r(9, 20)),                      # a column step
        ("bshd,bthd->bhst", q, k),                                         # heads in place: two batch letters
        ("nchw,kc->nkhw", r(2, 6, 5, 5), r(8, 6)),                         # a 1x1 convolution, NCHW
        ("...k,nk->...n", r(3, 5, 24), r(10, 24)),                         # nn.Linear over two leading dims
        ("...mk,...kn->...mn", r(4, 1, 6, 8), r(3, 8, 5)),                 # broadcast batches
        ("bmk,bkn->bmn", r(1, 6, 8).expand(4, 6, 8), r(4, 8, 5)),          # an expanded (stride 0) batch
        ("ii,i->i", r(7, 7), r(7)),                                        # a diagonal
        ("ij,jk", r(5, 6), r(6, 3)),                                       # implicit output
        ("mk,kn->nm", r(6, 9).t(), r(6, 4)[:, 1:]),                        # transposed input and output
        ("k,k->", r(33), r(33)),                                           # a dot
        ("m,n->mn", r(12), r(5)),                                          # an outer product
        ("mk,kn->mn", r(1, 1), r(1, 1)),                                   # sizes 1
        ("mk,kn->mn", r(40)[1:33].view(4, 8), r(8, 3)),                    # a pointer 4 bytes past the line
    ]


@pytest.mark.parametrize("case", range(14))
def test_einsum_matches_torch_over_views(device, case):
    equation, a, b = _cases(device)[case]
    close(dgt.einsum(equation, a, b), torch.einsum(equation, a, b), torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_einsum_in_16_bit_with_an_f32_out(device, dtype):
    a, b = rand(8, 64, dtype=dtype, device=device), rand(64, 24, dtype=dtype, device=device)[:, ::2]
    want = a.float() @ b.float()
    close(dgt.einsum("mk,kn->mn", a, b), want, dtype)
    out = torch.full((8, 12), float("nan"), device=device)
    dgt.einsum("mk,kn->mn", a, b, out=out)
    close(out, want, torch.float32)


def test_out_in_place_with_alpha_beta_and_an_epilogue(device):
    a, b = rand(6, 32, device=device), rand(32, 10, device=device)
    bias, scale, residual = rand(10, device=device), rand(6, 1, device=device), rand(6, 10, device=device)
    out = rand(10, 6, device=device).t()  # a column-major out
    start = out.clone()
    dgt.einsum("mk,kn->mn", a, b, out=out, alpha=0.5, beta=2.0,
               epilogue=[{"bias": bias}, {"scale": scale}, {"activation": "silu"}, {"clamp": (-0.5, 2.0)},
                         {"residual": residual}])
    want = (torch.nn.functional.silu((0.5 * a @ b + 2.0 * start + bias) * scale).clamp(-0.5, 2.0) + residual)
    close(out, want, torch.float32)


def test_an_empty_sum_gives_the_epilogue_of_zero(device):
    a, b, bias = torch.empty(4, 0, device=device), torch.empty(0, 3, device=device), rand(3, device=device)
    got = dgt.einsum("mk,kn->mn", a, b, epilogue=[{"bias": bias}, {"activation": "relu"}])
    assert torch.equal(got, torch.relu(bias).expand(4, 3))
    assert dgt.einsum("mk,kn->mn", torch.empty(0, 5, device=device), rand(5, 3, device=device)).shape == (0, 3)


@pytest.mark.parametrize("shapes", [((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,)), ((2, 1, 4, 5), (3, 5, 6)),
                                    ((4, 5), (2, 5, 3))])
def test_matmul_takes_torch_matmuls_shapes(device, shapes):
    a, b = rand(*shapes[0], device=device), rand(*shapes[1], device=device)
    got, want = dgt.matmul(a, b), torch.matmul(a, b)
    assert got.shape == want.shape
    close(got, want, torch.float32)


# ------------------------------------------------------------------------------------------- run-time rows

def test_rows_auto_takes_a_run_time_kernel_once_the_size_changes(device):
    w = rand(24, 40, device=device)
    prototypes = []
    for m in (3, 5, 9):
        x = rand(m, 40, device=device)
        close(dgt.einsum("mk,nk->mn", x, w), x @ w.t(), torch.float32)
        c = _contraction("mk,nk->mn", x, w)
        kernel, row = launch.kernel_for(c, launch.arch_of(x.device), reads_c=False)
        prototypes.append((kernel.prototype, row))
    assert prototypes[0][1] is None and "int64_t m" not in prototypes[0][0]  # the first size: its own kernel
    assert prototypes[1] == prototypes[2] and prototypes[1][1] is not None  # then one kernel for 1..64
    assert "int64_t m" in prototypes[1][0]


def test_rows_static_and_dynamic_are_what_they_say(device):
    w = rand(8, 16, device=device)
    x = rand(70, 16, device=device)
    c = _contraction("mk,nk->mn", x, w)
    arch = launch.arch_of(x.device)
    assert launch.kernel_for(c, arch, reads_c=False, rows="static")[1] is None
    kernel, row = launch.kernel_for(c, arch, reads_c=False, rows="dynamic")
    assert row is not None and "int64_t m" in kernel.prototype
    close(dgt.einsum("mk,nk->mn", x, w, rows="dynamic"), x @ w.t(), torch.float32)


def _contraction(equation, a, b):
    eq = launch.equation_of(equation, a.dim(), b.dim())
    out = torch.empty(dgt.problem.output_shape(eq, tuple(a.shape), tuple(b.shape)), device=a.device)
    return dgt.problem.contraction_of(eq, launch.tensor_meta(a, "a"), launch.tensor_meta(b, "b"),
                                      launch.tensor_meta(out, "out"))


# ------------------------------------------------------------------------------------------- Linear, autograd

def test_linear_is_nn_linear_with_the_same_state_dict(device):
    torch.manual_seed(0)
    ref = torch.nn.Linear(24, 12, device=device)
    ours = dgt.Linear(24, 12, device=device)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    ours.load_state_dict(ref.state_dict())
    x = rand(2, 3, 24, device=device)
    close(ours(x), ref(x), torch.float32)
    assert isinstance(ours, torch.nn.Linear)


def test_linear_forward_and_backward_match_f_linear(device):
    torch.manual_seed(0)
    x = rand(3, 5, 32, device=device).requires_grad_()
    w = rand(16, 32, device=device).requires_grad_()
    b = rand(16, device=device).requires_grad_()
    gy = rand(3, 5, 16, device=device)
    for activation, fn in (("", None), ("gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))):
        y = dgt.linear(x, w, b, activation=activation or None)
        ref_inputs = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        ref = torch.nn.functional.linear(*ref_inputs)
        ref = fn(ref) if fn else ref
        close(y, ref, torch.float32)
        grads = torch.autograd.grad(y, (x, w, b), gy)
        ref_grads = torch.autograd.grad(ref, ref_inputs, gy)
        for got, want in zip(grads, ref_grads):
            close(got, want, torch.float32)


def test_linear_fuses_the_activation_without_gradients(device):
    x, w, b = rand(4, 16, device=device), rand(8, 16, device=device), rand(8, device=device)
    with torch.no_grad():
        y = dgt.Linear.from_linear(_module(w, b), activation="silu")(x)
    close(y, torch.nn.functional.silu(x @ w.t() + b), torch.float32)


def _module(w, b):
    m = torch.nn.Linear(w.shape[1], w.shape[0], device=w.device)
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m


def test_backward_saves_only_what_the_wanted_gradients_read(device):
    x = rand(4, 16, device=device).requires_grad_()
    w = rand(8, 16, device=device)  # frozen: dW is not wanted, so x need not be saved
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        dgt.linear(x, w)
    assert saved == [w.shape]


def test_gradcheck_in_f32(device):
    """f32 finite differences with eps 1e-2 over sums of 8 terms of size ~1: the truncation error is about
    eps^2 |f'''| ~ 1e-4 and the rounding error 2^-24 * 8 / eps ~ 5e-6, well inside atol = rtol = 1e-2."""
    torch.manual_seed(0)
    x = rand(2, 3, 8, device=device).requires_grad_()
    w = rand(5, 8, device=device).requires_grad_()
    b = rand(5, device=device).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: dgt.linear(x, w, b), (x, w, b), eps=1e-2, atol=1e-2, rtol=1e-2)
    p, q = rand(2, 4, 3, device=device).requires_grad_(), rand(1, 3, 5, device=device).requires_grad_()
    assert torch.autograd.gradcheck(lambda p, q: dgt.einsum("bij,bjk->bik", p, q), (p, q), eps=1e-2, atol=1e-2,
                                    rtol=1e-2)


def test_einsum_with_an_epilogue_names_why_it_has_no_gradient(device):
    a = rand(3, 4, device=device).requires_grad_()
    y = dgt.einsum("mk,kn->mn", a, rand(4, 2, device=device), epilogue=[{"activation": "relu"}])
    with pytest.raises(dgt.TensorArgumentError, match="no gradient"):
        y.sum().backward()


def test_opcheck_passes_on_the_three_ops(device):
    x, w, b = (rand(3, 8, device=device).requires_grad_(), rand(5, 8, device=device).requires_grad_(),
               rand(5, device=device).requires_grad_())
    torch.library.opcheck(torch.ops.deepgemm.linear.default, (x, w, b, ""))
    a, c = rand(2, 3, 4, device=device).requires_grad_(), rand(2, 4, 5, device=device).requires_grad_()
    torch.library.opcheck(torch.ops.deepgemm.einsum.default, ("bij,bjk->bik", a, c, [], "", 1.0, "auto"))
    out = rand(2, 3, 5, device=device)
    torch.library.opcheck(torch.ops.deepgemm.einsum_out.default,
                          ("bij,bjk->bik", a.detach(), c.detach(), out, [rand(5, device=device)], "bias=0", 1.0, 0.5,
                           "auto"))


def test_replace_linear_keeps_the_parameters_and_the_result(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8, bias=False)).to(
        device)
    x = rand(5, 16, device=device)
    want = model(x)
    params = list(model.parameters())
    dgt.replace_linear(model)
    assert all(isinstance(model[i], dgt.Linear) for i in (0, 2))
    assert all(p is q for p, q in zip(model.parameters(), params))
    close(model(x), want, torch.float32)


def test_torch_compile_traces_through_without_a_graph_break(device):
    torch.manual_seed(0)
    model = dgt.replace_linear(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(),
                                                   torch.nn.Linear(32, 8))).to(device)
    x = rand(4, 16, device=device).requires_grad_()
    backend = "inductor" if device == "cuda" else "aot_eager"  # no C++ build of inductor's CPU code here
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    close(compiled(x), model(x), torch.float32)
    compiled(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_errors_name_the_argument_and_the_fix(device):
    with pytest.raises(dgt.TensorArgumentError, match="torch.float64 has no deepgemm kernel"):
        dgt.einsum("mk,kn->mn", torch.zeros(2, 3, dtype=torch.float64, device=device),
                   torch.zeros(3, 2, dtype=torch.float64, device=device))
    with pytest.raises(dgt.TensorArgumentError, match="beta=1.0 scales out"):
        dgt.einsum("mk,kn->mn", rand(2, 3, device=device), rand(3, 2, device=device), beta=1.0)
    with pytest.raises(dgt.TensorArgumentError, match="b: expected a torch.Tensor, got list"):
        dgt.einsum("mk,kn->mn", rand(2, 3, device=device), [[1.0, 2.0]] * 3)
    with pytest.raises(dgt.TensorArgumentError, match="rows='sometimes'"):
        dgt.einsum("mk,kn->mn", rand(2, 3, device=device), rand(3, 2, device=device), rows="sometimes")


# ------------------------------------------------------------------------------------------- CUDA only

@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 16])
def test_linear_backward_on_a_llama_down_projection(tokens):
    """The down projection of a Llama MLP (14336 -> 4096, bf16) forward and backward against F.linear's: at one token
    dX is a vector times a matrix, run by a TMA kernel."""
    torch.manual_seed(0)
    x = rand(tokens, 14336, dtype=torch.bfloat16, device="cuda").requires_grad_()
    w = (rand(4096, 14336, dtype=torch.float32, device="cuda") / 120).to(torch.bfloat16).requires_grad_()
    gy = rand(tokens, 4096, dtype=torch.bfloat16, device="cuda")
    y = dgt.linear(x, w)
    ref_inputs = [t.detach().clone().requires_grad_() for t in (x, w)]
    ref = torch.nn.functional.linear(*ref_inputs)
    close(y, ref, torch.bfloat16)
    for got, want in zip(torch.autograd.grad(y, (x, w), gy), torch.autograd.grad(ref, ref_inputs, gy)):
        close(got, want, torch.bfloat16)


@pytest.mark.gpu
def test_a_thread_whose_first_call_encodes_a_tensor_map():
    """A kernel whose one-time state (attributes, SM count) the main thread set, called first on a new thread with
    new pointers, encodes a tensor map before any runtime call of its own made a context current there: torch's
    autograd thread in a backward after a forward. The launcher makes the context current first; without that the
    driver refuses the encode and the call returns cudaErrorInvalidValue."""
    torch.manual_seed(0)
    equation = "n,nk->k"  # a vector times a matrix: a TMA kernel on sm_90a, as the down projection's dX at 1 token
    inputs = [(rand(4096, dtype=torch.bfloat16, device="cuda"), rand(4096, 4096, dtype=torch.bfloat16,
                                                                         device="cuda") / 64) for _ in range(2)]
    outs = [torch.empty(4096, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    dgt.einsum(equation, *inputs[0], out=outs[0])
    failures = []

    def call_on_new_pointers():
        try:
            dgt.einsum(equation, *inputs[1], out=outs[1])
        except KernelCallError as err:
            failures.append(err)

    thread = threading.Thread(target=call_on_new_pointers)
    thread.start()
    thread.join()
    assert not failures, failures[0]
    torch.cuda.synchronize()
    for (v, m), out in zip(inputs, outs):
        close(out, torch.einsum(equation, v.float(), m.float()), torch.bfloat16)


@pytest.mark.gpu
def test_a_cuda_graph_captures_and_replays_forward_and_backward():
    torch.manual_seed(0)
    model = dgt.replace_linear(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(),
                                                   torch.nn.Linear(128, 64))).cuda()
    x = torch.randn(16, 64, device="cuda", requires_grad=True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # builds and loads every kernel before capture
            model(x).sum().backward()
    torch.cuda.current_stream().wait_stream(stream)
    x.grad = None
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model(x)
        y.sum().backward()
    with torch.no_grad():
        x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    ref = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 64)).cuda()
    ref.load_state_dict(model.state_dict())
    xr = x.detach().clone().requires_grad_()
    yr = ref(xr)
    yr.sum().backward()
    close(y, yr, torch.float32)
    close(x.grad, xr.grad, torch.float32)
    close(model[0].weight.grad, ref[0].weight.grad, torch.float32)


# ------------------------------------------------------------------------------- random views, on the host


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls())
def test_random_views_match_torch_einsum_on_the_cpu(call):
    """Random equations over random views (permuted, padded, broadcast, size-1 dims), each operand a strided view
    into a buffer of its own, out included: deepgemm's host kernel against torch.einsum."""
    equation, ((sa, ta, na), (sb, tb, nb), (so, to, no)) = call
    g = torch.Generator().manual_seed(0)
    a = torch.randn(na, generator=g).as_strided(sa, ta)
    b = torch.randn(nb, generator=g).as_strided(sb, tb)
    out = torch.full((no,), float("nan")).as_strided(so, to)
    dgt.einsum(equation, a, b, out=out)
    want = torch.einsum(equation, a, b)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_spec_for_is_the_spec_einsum_builds_and_it_generates_a_folder(tmp_path):
    import deepgemm

    q, k = torch.randn(2, 9, 4, 16), torch.randn(2, 11, 4, 16)
    spec = dgt.spec_for("bshd,bthd->bhst", q, k, arch="sm_90a", name="attn_scores")
    assert spec.name == "attn_scores" and spec.arch == "sm_90a"
    assert spec.A.strides == tuple(q.stride()) and spec.B.strides == tuple(k.stride())  # the views as they are
    eq = launch.equation_of("bshd,bthd->bhst", 4, 4)
    out = torch.empty(2, 4, 9, 11)
    c = dgt.problem.contraction_of(eq, launch.tensor_meta(q, "a"), launch.tensor_meta(k, "b"),
                                   launch.tensor_meta(out, "out"))
    same = launch.spec_of(c, "sm_90a", reads_c=False, name="attn_scores")
    assert same == spec
    generated = deepgemm.generate(spec, tmp_path)
    assert "attn_scores(const float* A, const float* B, float* C" in generated.prototype
    dynamic = dgt.spec_for("mk,nk->mn", torch.randn(5, 64), torch.randn(32, 64), rows="dynamic", arch="sm_90a")
    assert dynamic.run_time_letter[1:] == (1, 64)
    with pytest.raises(dgt.TensorArgumentError, match="2 row letters"):
        dgt.spec_for("bmk,nk->bmn", torch.randn(3, 5, 64)[:, :4], torch.randn(32, 64), rows="dynamic")


def test_a_call_of_a_known_shape_skips_the_analysis_but_not_the_overlap_check(device, monkeypatch):
    buf = rand(64, device=device)
    a, w = buf[:16].view(4, 4), rand(3, 4, device=device)
    out = torch.empty(4, 3, device=device)
    dgt.einsum("mk,nk->mn", a, w, out=out)
    monkeypatch.setattr(launch, "kernel_for", lambda *args, **kw: pytest.fail("the memoized call analysed again"))
    fresh = torch.empty(4, 3, device=device)
    dgt.einsum("mk,nk->mn", a, w, out=fresh)
    close(fresh, a @ w.t(), torch.float32)
    inside = buf[32:44].view(4, 3)  # same shape, strides and alignment as out, inside buf but apart from a
    dgt.einsum("mk,nk->mn", a, w, out=inside)
    close(inside, a @ w.t(), torch.float32)
    with pytest.raises(dgt.TensorArgumentError, match="overlaps"):
        dgt.einsum("mk,nk->mn", a, w, out=buf[4:16].view(4, 3))


def test_only_eager_calls_on_plain_tensors_without_gradients_skip_the_op():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from deepgemm.torch import ops

    x, w = torch.randn(2, 3), torch.nn.Parameter(torch.randn(4, 3))
    assert not ops.eager(x, w)  # w records a gradient
    with torch.no_grad():
        assert ops.eager(x, w, None)
    assert ops.eager(x, w.detach())
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
        assert not ops.eager(fake)


def test_autocast_regions_cast_the_inputs_as_for_f_linear(device):
    x, w, b = rand(3, 16, device=device), rand(8, 16, device=device), rand(8, device=device)
    dtype = torch.bfloat16
    with torch.autocast(device, dtype=dtype):
        got = dgt.linear(x, w, b)
        want = torch.nn.functional.linear(x, w, b)
        scores = dgt.einsum("mk,nk->mn", x, w)
    assert got.dtype == want.dtype == scores.dtype == dtype
    close(got, want.float(), dtype)

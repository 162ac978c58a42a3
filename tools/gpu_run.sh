#!/usr/bin/env bash
# The GPU suite, run on a GPU machine from a checkout (no install needed; `make gpu-suite` runs it):
#   tools/gpu_run.sh [PHASE ...]       phases: verify bench indep sanitize tune einsum pytest (default: the first four)
# verify, bench and sanitize first gen + build (-j nproc) specs/, specs/bench/, RAND mixed random specs
# (seed 7) and RAND_TMA TMA-friendly random specs planned with --family hopper (seed 11). Then:
#   verify    every directory (specs and random: seeds 1,2,3; specs/bench: seed 1), JSON under $OUT
#   bench     specs/bench and specs/ against cuBLAS (graph timing)
#   indep     tools/independent_cublas.py: the same cuBLAS problems timed by PyTorch, same method
#   sanitize  compute-sanitizer memcheck / racecheck / synccheck on small Hopper, splitk, dot and gemv kernels
#   tune      deepgemm tune TUNE_SPECS (default specs/*.yaml) at TUNE_LEVEL (default 1) into $OUT/tuning.json
#   einsum    tools/einsum_suite.sh (specs/einsum, EINSUM_RAND random specs) into $OUT/einsum
#   pytest    the gpu-marked tests (pytest -m gpu)
# Logs and JSON go to $OUT (or ./gpu_out), packed so that at most 8 files come back; a table is last.
# T_BUILD, T_VERIFY, T_VERIFY_BENCH, T_BENCH, T_TUNE, T_PYTEST: seconds each step may take.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}
RAND=${RAND:-60}
RAND_TMA=${RAND_TMA:-40}
PHASES=${*:-verify bench indep sanitize}
mkdir -p "$OUT"
W=$(mktemp -d)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
JOBS=$(nproc)
dg() { "$PY" -m dgemm_cli "$@"; }
has() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
T_START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T_START )) s] $*"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; echo "commit ${DG_COMMIT:-unknown}"; } > "$OUT/env.txt"
SETS=${SETS:-specs bench rand randtma}   # which sets to gen and build (also: randsmall / randgemv: RAND_SMALL small-M specs on splitk / gemv; randdyn: RAND_DYN specs with run-time M; f32: specs/f32, the FFMA path's views; epilogue: specs/epilogue; randep / randeptma: RAND_EP random specs with fused epilogues / RAND_EP_TMA TMA-friendly ones on hopper; randflat: RAND_FLAT TMA specs with a row letter in 64-row blocks on hopper)
sets() { for x in $SETS; do [ "$x" != "$1" ] && [ -d "$W/$x" ] && echo "$W/$x"; done; }
if has verify || has bench || has sanitize; then
  case " $SETS " in *" specs "*) dg gen specs/*.yaml -o "$W/specs" > "$OUT/gen_specs.txt" 2>&1 || echo "gen specs failed";; esac
  case " $SETS " in *" bench "*) dg gen specs/bench/*.yaml -o "$W/bench" > "$OUT/gen_bench.txt" 2>&1 || echo "gen bench failed";; esac
  case " $SETS " in *" rand "*)
    dg random-specs "$RAND" -o "$W/rs" --seed 7 > /dev/null
    dg gen "$W"/rs/*.yaml -o "$W/rand" > "$OUT/gen_rand.txt" 2>&1 || echo "gen random failed";; esac
  case " $SETS " in *" randsmall "*)
    dg random-specs "${RAND_SMALL:-40}" -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
    dg gen "$W"/rss/*.yaml -o "$W/randsmall" --family splitk > "$OUT/gen_randsmall.txt" 2>&1 || echo "gen random small-M failed";; esac
  case " $SETS " in *" randgemv "*)  # the same small-M specs preferring gemv (those with M > 4 are gated out)
    [ -d "$W/rss" ] || dg random-specs "${RAND_SMALL:-40}" -o "$W/rss" --seed 21 --small-m-share 1.0 > /dev/null
    dg gen "$W"/rss/*.yaml -o "$W/randgemv" --family gemv > "$OUT/gen_randgemv.txt" 2>&1;; esac
  case " $SETS " in *" decodegemv "*)  # the decode benchmarks with M <= 8 on the gemv family, whatever the model picks
    dg gen specs/bench/decode_[18]x*.yaml -o "$W/decodegemv" --family gemv > "$OUT/gen_decodegemv.txt" 2>&1 || echo "gen decode gemv failed";; esac
  case " $SETS " in *" f32 "*) dg gen specs/f32/*.yaml -o "$W/f32" > "$OUT/gen_f32.txt" 2>&1 || echo "gen f32 failed";; esac
  case " $SETS " in *" epilogue "*) dg gen specs/epilogue/*.yaml -o "$W/epilogue" > "$OUT/gen_epilogue.txt" 2>&1 || echo "gen epilogue failed";; esac
  case " $SETS " in *" randep "*)  # fused epilogues on every random spec (the default sets give a share of them)
    dg random-specs "${RAND_EP:-60}" -o "$W/rse" --seed 41 --small-m-share 0.25 --dynamic-share 0.2 --epilogue-share 1.0 > /dev/null
    dg gen "$W"/rse/*.yaml -o "$W/randep" > "$OUT/gen_randep.txt" 2>&1 || echo "gen random epilogue failed";; esac
  case " $SETS " in *" randeptma "*)  # the same on TMA-friendly views, planned with the hopper family
    dg random-specs "${RAND_EP_TMA:-30}" -o "$W/rset" --seed 43 --tma-share 1.0 --epilogue-share 1.0 > /dev/null
    dg gen "$W"/rset/*.yaml -o "$W/randeptma" --family hopper > "$OUT/gen_randeptma.txt" 2>&1 || echo "gen random epilogue tma failed";; esac
  case " $SETS " in *" randdyn "*)  # run-time M: random specs (half decode-shaped) with a row letter sized at run time
    dg random-specs "${RAND_DYN:-30}" -o "$W/rsd" --seed 31 --small-m-share 0.5 --dynamic-share 1.0 > /dev/null
    dg gen "$W"/rsd/*.yaml -o "$W/randdyn" > "$OUT/gen_randdyn.txt" 2>&1 || echo "gen random run-time M failed";; esac
  case " $SETS " in *" randflat "*)  # TMA specs with a row letter in 64-row blocks on hopper
    dg random-specs "${RAND_FLAT:-40}" -o "$W/rsf" --seed 71 --tma-share 1.0 --row-blocks-share 1.0 > /dev/null
    dg gen "$W"/rsf/*.yaml -o "$W/randflat" --family hopper > "$OUT/gen_randflat.txt" 2>&1 || echo "gen random flat failed";; esac
  case " $SETS " in *" randtma "*)
    dg random-specs "$RAND_TMA" -o "$W/rst" --seed 11 --tma-share 1.0 > /dev/null
    dg gen "$W"/rst/*.yaml -o "$W/randtma" --family hopper > "$OUT/gen_randtma.txt" 2>&1 || echo "gen random tma failed";; esac
  # shellcheck disable=SC2046
  timeout "${T_BUILD:-3600}" "$PY" -m dgemm_cli build $(sets none) -j "$JOBS" --json > "$OUT/build.json" 2> "$OUT/build_err.txt"
  stamp "build rc=$?"
fi

if has verify; then
  # shellcheck disable=SC2046
  timeout "${T_VERIFY:-3600}" "$PY" -m dgemm_cli verify $(sets bench) --repeat "${REPEAT:-0}" --json > "$OUT/verify.json" 2> "$OUT/verify_err.txt"; stamp "verify rc=$?"
  if [ -d "$W/bench" ]; then
    # 8192^3 takes minutes in the float64 reference: only when BIG_VERIFY=1.
    bench_dirs=$(ls -d "$W"/bench/*/ | grep -v -E "${BIG_VERIFY:+^$}sq8192")
    timeout "${T_VERIFY_BENCH:-3600}" "$PY" -m dgemm_cli verify $bench_dirs --seeds 1 --repeat "${REPEAT:-0}" --json > "$OUT/verify_bench.json" 2> "$OUT/verify_bench_err.txt"; stamp "verify bench rc=$?"
  fi
fi
if has bench; then
  # shellcheck disable=SC2046
  timeout "${T_BENCH:-3600}" "$PY" -m dgemm_cli bench $(sets rand | grep -v -E 'rand(tma|small|gemv|dyn)?$') --reps "${REPS:-20}" ${BENCH_M:+--m "$BENCH_M"} --json > "$OUT/bench.json" 2> "$OUT/bench_err.txt"; stamp "bench rc=$?"
fi
if has indep; then
  "$PY" tools/independent_cublas.py --json "$OUT/indep.json" > "$OUT/indep.txt" 2>&1; stamp "indep rc=$?"
fi
if has sanitize; then
  # The smallest directories of each family among the random sets (cheap under the sanitizer): three
  # Hopper, two splitk, one dot, two gemv, two f32 (FFMA) cta kernels, two specs with run-time M and three with
  # epilogues.
  small=$("$PY" - $(sets none) <<'PYEOF'
import json, pathlib, sys
rows = {"hopper": [], "splitk": [], "dot": [], "gemv": [], "ffma": [], "run-time": [], "epilogue": []}
for root in sys.argv[1:]:
    for p in pathlib.Path(root).glob("*/plan.json"):
        doc = json.loads(p.read_text())
        plan = doc["plan"]
        if "epilogue" in doc["spec"] and "buckets" not in plan:  # fused epilogues: any family, fixed size
            prim = plan["primary"]
            rows["epilogue"].append((prim.get("blocks") or prim.get("tiles", 0), str(p.parent)))
        if "buckets" in plan:  # run-time M: the bucket of the largest size stands for the directory
            plan = plan["buckets"][-1]
            rows["run-time"].append((plan["primary"].get("blocks") or plan["primary"].get("tiles", 0), str(p.parent)))
            continue
        fam, prim = plan["family"], plan["primary"]
        if fam == "hopper":
            rows[fam].append((prim["tiles"] * prim["k_iters"], str(p.parent)))
        elif fam == "cta" and prim.get("instruction") == "ffma":
            rows["ffma"].append((prim["tiles"], str(p.parent)))
        elif fam in rows:
            rows[fam].append((prim["blocks"], str(p.parent)))
keep = {"hopper": 3, "splitk": 2, "dot": 1, "gemv": 2, "ffma": 2, "run-time": 2, "epilogue": 3}
print(" ".join(d for fam, n in keep.items() for _, d in sorted(rows[fam])[:n]))
PYEOF
)
  conv="$W/bench/conv_nchw_32x64x56x56_k64"
  # SANITIZE_DIRS: more directories (e.g. one a bug report names).
  for d in $small $( [ -d "$conv" ] && echo "$conv" ) ${SANITIZE_DIRS:-}; do
    n=$(basename "$d")
    for tool in memcheck racecheck synccheck; do
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$d/build/sm_90a/${n}_harness" verify --seeds 1 --samples 16 \
        > "$OUT/san_${tool}_$n.txt" 2>&1
      echo "$tool $n rc=$?" >> "$OUT/sanitize.txt"
    done
  done
  stamp "sanitize done"
fi
if has tune; then
  # shellcheck disable=SC2086  # TUNE_SPECS is a list of globs
  # TUNE_FAMILIES="gemv splitk": measure only those families' candidates.
  timeout "${T_TUNE:-3600}" "$PY" -m dgemm_cli tune ${TUNE_SPECS:-specs/*.yaml} --level "${TUNE_LEVEL:-1}" --db "$OUT/tuning.json" -j "$JOBS" \
    $(for f in ${TUNE_FAMILIES:-}; do printf -- '--family %s ' "$f"; done) \
    --budget "${TUNE_BUDGET:-120}" -o "$W/tune" --json > "$OUT/tune.json" 2> "$OUT/tune_err.txt"
  stamp "tune rc=$?"
fi
if has pytest; then
  timeout "${T_PYTEST:-3600}" "$PY" -m pytest -q -m gpu tests > "$OUT/pytest_gpu.txt" 2>&1; stamp "pytest gpu rc=$?"
  tail -3 "$OUT/pytest_gpu.txt"
fi
if has einsum; then
  OUT="$OUT/einsum" bash tools/einsum_suite.sh "${EINSUM_RAND:-0}" 11 > "$OUT/einsum_suite.txt" 2>&1
  stamp "einsum rc=$?"; tail -25 "$OUT/einsum_suite.txt"
fi
# SASS of the square kernel: HGMMA (wgmma) and UTMALDG (TMA) must be there.
obj="$W/bench/sq4096_bf16/build/sm_90a/sq4096_bf16.o"
if [ -f "$obj" ]; then
  cuobjdump -sass "$obj" > "$W/sq.sass" 2>&1
  echo "HGMMA $(grep -c HGMMA "$W/sq.sass") UTMALDG $(grep -c UTMALDG "$W/sq.sass") HMMA $(grep -c 'HMMA' "$W/sq.sass")" > "$OUT/sass.txt"
fi

"$PY" tools/gpu_summary.py "$OUT"
KEEP='^(build|verify|verify_bench|bench|indep|tuning)\.json$|^logs\.tgz$'
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude logs.tgz $(cd "$OUT" && ls | grep -v -E "$KEEP")
(cd "$OUT" && ls | grep -v -E "$KEEP" | xargs rm -rf)

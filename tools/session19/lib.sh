# Sourced by tools/session19/call1.sh .. call3.sh after tools/device_lib.sh: the end every variant call shares.
# variants_report TIMEOUT DIR... [bench options]: build and verify the variant directories (seeds 1, 2), bench them
# in turn 3 rounds, print variant_table.py's table into summary.txt with the failed verifies, and pack the rest.
variants_report() {
  local limit=$1; shift
  local -a dirs=() opts=()
  while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do dirs+=("$1"); shift; done
  opts=("$@")
  stamp "gen ${#dirs[@]} dirs"
  build_verify 1,2 "${dirs[@]}"
  bench_rounds 3 "$limit" "${dirs[@]}" "${opts[@]}"
  python3 tools/session19/variant_table.py "$OUT" | tee "$OUT/summary.txt"
  cat "$OUT/failures.txt" >> "$OUT/summary.txt"
  pack 'summary\.txt|verify\.json|bench_[123]\.json'
}

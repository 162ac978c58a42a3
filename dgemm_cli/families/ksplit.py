"""What the split-K families `splitk` and `dot` share (pure): the constants their cost models price the same
launch, DRAM round trip, latency hiding and second kernel with, and the test that hands a problem to one or the
other. Both import it; neither imports the other.

The constants are the splitk family's, fitted to its measurements in families/calibration.csv
(tools/fit_calibration.py); the dot family prices the same dependent launch, DRAM and scratch buffer with them.
"""

from __future__ import annotations

from dgemm_cli.views import ProblemViews

# Cost model constants (µs), only to rank candidates and families. Set a priori, checked against level-1
# tunes of the decode benchmarks on the H200.
# fitted: tools/fit_calibration.py, table families/calibration.csv
LAUNCH_US = 2.0  # every launch: start-up, the first load's round trip, the last store
# fitted: tools/fit_calibration.py, table families/calibration.csv
MEMORY_LATENCY_US = 1.0  # DRAM round trip that bytes in flight must cover (Little's law)
# fitted: tools/fit_calibration.py, table families/calibration.csv
WARPS_TO_HIDE_LATENCY = 8  # resident warps an SM needs before the memory pipe stays busy
# Groups (set a priori, to be measured): the second kernel (launched as a programmatic dependent launch, it
# waits for the first grid and one L2 round trip for the partials), and the stream-ordered alloc and free.
GROUPS_US = 2.0


def rows_at_run_time(views: ProblemViews) -> bool:
    """One kernel serves a range of a run-time letter (M is a kernel argument)."""
    rt = views.spec.run_time_letter
    return rt is not None and rt[1] < rt[2]


def is_dot(views: ProblemViews) -> bool:
    """M = N = 1 at a fixed size: C has one element a batch index (a full reduction, a batch of dot products). The
    dot family's blocks along K take these problems; an output tile (splitk) would waste all but one of its rows
    and columns."""
    return views.m == 1 and views.n == 1 and not rows_at_run_time(views)

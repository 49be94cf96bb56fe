"""The rules of ``spark.transforms.burrow`` in Spark SQL, as window aggregates over each
sample's window (itself and the ``window - 1`` samples before it), so Spark evaluates them
with generated code: no Python UDF round trip per row, no arrays of structs.

``burrow.evaluate`` stays the reference: the tests check both agree on generated windows, and
the benchmark's plain-Python side uses it. What the rules need of a window reduces to
aggregates over it: its size, its first sample, its first and last commit, the number of
commits, the smallest and largest committed offset among them, whether any sample has no lag,
and whether any commit after the window's first one went back (REWIND) or had less lag than
the commit before it (WARN). Those last two are flags each commit carries against the commit
before it in the whole history; the first commit of the window is discounted because its
predecessor lies outside the window. The aggregates are scalar columns, not structs: nested
structs through the windows and the final explode made one generated method so large that
the JIT took 3-6 s of a core to compile it, more than once per session.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from spark.transforms.burrow import ERR, OK, REWIND, STALL, STOP, WARN

RESULT = ("status", "consume_rate", "produce_rate", "catch_up_s")
ORDER = ("ts_ms", "is_commit")
FRAME = (
    "_n",
    "_f_ts",
    "_f_end",
    "_c0_ts",
    "_c0_c",
    "_c0_lag",
    "_c0_back",
    "_c0_shrank",
    "_c1_ts",
    "_c1_c",
    "_c1_lag",
    "_nc",
    "_cmin",
    "_cmax",
    "_zero",
    "_backs",
    "_shrinks",
)


LAG = "greatest(log_end_offset - committed_offset, 0)"


def quoted(names) -> list[str]:
    """Column names for SQL text (``group`` and ``partition`` are keywords)."""
    return [f"`{n}`" for n in names]


def _rate(first: str, last: str, t0: str, t1: str) -> str:
    """``burrow._rate``: per second, null unless time moved forward."""
    per_ms = f"cast({last} - {first} AS double) * 1000.0D / cast({t1} - {t0} AS double)"
    return f"CASE WHEN {t1} > {t0} THEN {per_ms} END"


def with_frames(samples: DataFrame, keys: list[str], window: int) -> DataFrame:
    """``samples`` (``ts_ms, committed_offset, log_end_offset, is_commit`` per ``keys``) plus
    the aggregates of each sample's window (``FRAME`` columns). SQL text rather than
    ``Column`` objects: each ``Column`` operation is a round trip to the JVM (about 800 of
    them here, 0.2-1 s of the driver's time per run on a loaded machine), a text is one."""
    order = f"PARTITION BY {', '.join(quoted(keys))} ORDER BY {', '.join(ORDER)}"
    before = f"OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    frame = f"OVER ({order} ROWS BETWEEN {window - 1} PRECEDING AND CURRENT ROW)"
    s = samples.selectExpr(
        "*",
        f"{LAG} AS _lag",
        f"last(IF(is_commit, committed_offset, NULL), true) {before} AS _prev_c",
        f"last(IF(is_commit, {LAG}, NULL), true) {before} AS _prev_lag",
    ).selectExpr(
        "*",
        "IF(is_commit, coalesce(committed_offset < _prev_c, false), NULL) AS _back",
        "IF(is_commit, coalesce(_lag < _prev_lag, false), NULL) AS _shrank",
    )

    def commit(edge: str, column: str, name: str) -> str:
        """``column`` of the window's first or last commit (every commit has it)."""
        return f"{edge}(IF(is_commit, {column}, NULL), true) {frame} AS {name}"

    return s.selectExpr(
        *quoted(samples.columns),
        f"count(1) {frame} AS _n",
        f"first(ts_ms) {frame} AS _f_ts",
        f"first(log_end_offset) {frame} AS _f_end",
        commit("first", "ts_ms", "_c0_ts"),
        commit("first", "committed_offset", "_c0_c"),
        commit("first", "_lag", "_c0_lag"),
        commit("first", "_back", "_c0_back"),
        commit("first", "_shrank", "_c0_shrank"),
        commit("last", "ts_ms", "_c1_ts"),
        commit("last", "committed_offset", "_c1_c"),
        commit("last", "_lag", "_c1_lag"),
        f"sum(cast(is_commit AS int)) {frame} AS _nc",
        f"min(IF(is_commit, committed_offset, NULL)) {frame} AS _cmin",
        f"max(IF(is_commit, committed_offset, NULL)) {frame} AS _cmax",
        f"max(cast(_lag = 0 AS int)) {frame} AS _zero",
        f"sum(cast(_back AS int)) {frame} AS _backs",
        f"sum(cast(_shrank AS int)) {frame} AS _shrinks",
    )


def evaluate(
    framed: DataFrame,
    *,
    now_ms: str,
    last_commit_ms: str,
    log_start_offset: str,
    min_stop_ms: int,
) -> DataFrame:
    """``framed`` (``with_frames`` output; the current row is the window's last sample)
    without the ``FRAME`` columns, plus ``status, consume_rate, produce_rate,
    catch_up_s``. ``now_ms``, ``last_commit_ms``, ``log_start_offset``: SQL expressions
    over ``framed``'s columns."""
    keep = [c for c in framed.columns if c not in FRAME and c not in RESULT]
    nc = "coalesce(_nc, 0)"
    consume = _rate("_c0_c", "_c1_c", "_c0_ts", "_c1_ts")
    s = framed.selectExpr(
        "*",
        f"CASE WHEN {nc} >= 2 THEN {consume} END AS consume_rate",
        _rate("_f_end", "log_end_offset", "_f_ts", "ts_ms") + " AS produce_rate",
        f"{now_ms} AS _now",
        f"{last_commit_ms} AS _last_commit",
        f"{log_start_offset} AS _log_start",
    )

    def after_first(count: str, flag: str) -> str:
        """Commits after the window's first one with ``flag`` set."""
        return f"coalesce({count}, 0) - coalesce(cast(_c0_{flag} AS int), 0) > 0"

    span = f"CASE WHEN {nc} > 0 THEN _c1_ts - _c0_ts ELSE 0 END"
    stop = (
        f"_last_commit IS NOT NULL AND _now - _last_commit > greatest(cast({min_stop_ms} AS"
        f" long), {span})"
    )
    stall = f"{nc} >= 2 AND _cmin = _cmax"
    warn = f"{nc} >= 3 AND NOT ({after_first('_shrinks', 'shrank')}) AND _c1_lag > _c0_lag"
    status = (
        f"CASE WHEN _log_start IS NOT NULL AND committed_offset < _log_start THEN '{ERR}'"
        f" WHEN {LAG} = 0 THEN '{OK}'"
        f" WHEN {after_first('_backs', 'back')} THEN '{REWIND}'"
        f" WHEN {stop} THEN '{STOP}'"
        f" WHEN _zero = 1 THEN '{OK}'"
        f" WHEN {stall} THEN '{STALL}'"
        f" WHEN {warn} THEN '{WARN}'"
        f" ELSE '{OK}' END"
    )
    catch_up = (
        f"CASE WHEN {LAG} = 0 THEN 0.0D WHEN consume_rate IS NOT NULL AND produce_rate IS NOT"
        f" NULL AND consume_rate > produce_rate THEN cast({LAG} AS double) /"
        " (consume_rate - produce_rate) END"
    )
    return s.selectExpr(
        *quoted(keep),
        f"{status} AS status",
        "consume_rate",
        "produce_rate",
        f"{catch_up} AS catch_up_s",
    )

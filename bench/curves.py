"""Recall/throughput curves over an `ef` sweep (standard library only): shared by bench/ann.py
and bench/filter_sweep.py."""


def at_recall(rows, target, key):
    """`key` of the rows (e.g. queries/s, p99) where recall first reaches `target`, interpolated
    linearly in recall between the two ef values around it; None if no ef reaches it. Returns
    (value, ef_lo, ef_hi)."""
    rows = sorted(rows, key=lambda r: r["ef"])
    for i, r in enumerate(rows):
        if r["recall"] >= target:
            if i == 0 or rows[i - 1]["recall"] >= r["recall"]:
                return r[key], r["ef"], r["ef"]
            p = rows[i - 1]
            w = (target - p["recall"]) / (r["recall"] - p["recall"])
            return p[key] + w * (r[key] - p[key]), p["ef"], r["ef"]
    return None, None, None


def qps_at(rows, target):
    """Queries/s where recall first reaches `target` (see `at_recall`). Returns (qps, ef_lo,
    ef_hi)."""
    return at_recall(rows, target, "queries_per_second")

"""Recall/throughput curves over an `ef` sweep (standard library only): shared by bench/ann.py
and bench/filter_sweep.py."""


def qps_at(rows, target):
    """Queries/s where recall first reaches `target`, interpolated linearly in recall between the
    two ef values around it; None if no ef reaches it. Returns (qps, ef_lo, ef_hi)."""
    rows = sorted(rows, key=lambda r: r["ef"])
    for i, r in enumerate(rows):
        if r["recall"] >= target:
            if i == 0 or rows[i - 1]["recall"] >= r["recall"]:
                return r["queries_per_second"], r["ef"], r["ef"]
            p = rows[i - 1]
            w = (target - p["recall"]) / (r["recall"] - p["recall"])
            return p["queries_per_second"] + w * (r["queries_per_second"] - p["queries_per_second"]), p["ef"], r["ef"]
    return None, None, None

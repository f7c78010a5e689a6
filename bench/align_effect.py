"""Alignment effect against training budget (standard library only).

    align_effect.py OUT_SVG BUNDLE:EVAL_DIR [BUNDLE:EVAL_DIR ...]

Each BUNDLE is an aligned bundle (its training.json gives the pairs trained on) and EVAL_DIR the
`capot eval` report comparing its base (first encoder) with it (last encoder). Prints a Markdown
table (clean and typo-files-mean nDCG@10 and MRR@10, share of the base's clean→noisy gap won
back) and writes an SVG chart of clean and noisy nDCG@10 against pairs trained on, the base as
the point at 0 pairs.
"""

import json
import sys


def conditions(encoder):
    by = {c["kind"]: [] for c in encoder["conditions"]}
    for c in encoder["conditions"]:
        by[c["kind"]].append(c)
    clean = by["clean"][0]["metrics"]
    noisy = [c["metrics"] for kind, cs in by.items() if kind != "clean" for c in cs if not c["members"]]
    mean = lambda key: sum(m[key] for m in noisy) / len(noisy)
    return {
        "clean_ndcg": clean["ndcg@10"],
        "clean_mrr": clean["mrr@10"],
        "noisy_ndcg": mean("ndcg@10"),
        "noisy_mrr": mean("mrr@10"),
    }


def pairs_trained(bundle):
    with open(f"{bundle}/training.json", encoding="utf-8") as f:
        t = json.load(f)
    return sum(step["pairs"] for step in t["curve"])


def svg(points, base, path):
    w, h, left, right, top, bottom = 640, 360, 60, 20, 20, 50
    xs = [0] + [p["pairs"] for p in points]
    ys = [base["clean_ndcg"], base["noisy_ndcg"]] + [
        v for p in points for v in (p["clean_ndcg"], p["noisy_ndcg"])
    ]
    x_max = max(xs) or 1
    y_lo, y_hi = min(ys) - 0.01, max(ys) + 0.01  # both target lines lie inside
    sx = lambda x: left + (w - left - right) * x / x_max
    sy = lambda y: top + (h - top - bottom) * (y_hi - y) / (y_hi - y_lo)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
        f'<text x="{(w + left) / 2}" y="{h - 12}" text-anchor="middle">query pairs trained on</text>',
        f'<text x="14" y="{(h - bottom + top) / 2}" text-anchor="middle" transform="rotate(-90 14 {(h - bottom + top) / 2})">nDCG@10</text>',
    ]
    for i in range(5):
        y = y_lo + (y_hi - y_lo) * i / 4
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3f}</text>')
        out.append(f'<line x1="{left}" y1="{sy(y):.1f}" x2="{w - right}" y2="{sy(y):.1f}" stroke="#ddd"/>')
    for x in xs:
        out.append(f'<text x="{sx(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">{x:,}</text>')
    half_gap = base["noisy_ndcg"] + (base["clean_ndcg"] - base["noisy_ndcg"]) / 2
    for y, label in ((half_gap, "noisy target: half the gap"), (base["clean_ndcg"] * 0.99, "clean budget: −1%")):
        out.append(
            f'<line x1="{left}" y1="{sy(y):.1f}" x2="{w - right}" y2="{sy(y):.1f}" stroke="#888" stroke-dasharray="4 4"/>'
            f'<text x="{w - right - 4}" y="{sy(y) - 4:.1f}" text-anchor="end" fill="#888">{label}</text>'
        )
    for key, colour, label in (("clean_ndcg", "#1f77b4", "clean"), ("noisy_ndcg", "#d62728", "noisy (mean)")):
        pts = [(0, base[key])] + [(p["pairs"], p[key]) for p in points]
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{sx(pts[-1][0]) - 4:.1f}" y="{sy(pts[-1][1]) - 8:.1f}" text-anchor="end" fill="{colour}">{label}</text>')
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_svg, runs = argv[1], argv[2:]
    base, points = None, []
    for run in runs:
        bundle, eval_dir = run.split(":", 1)
        with open(f"{eval_dir}/report.json", encoding="utf-8") as f:
            report = json.load(f)
        base = conditions(report["encoders"][0])
        point = conditions(report["encoders"][-1])
        point["pairs"] = pairs_trained(bundle)
        point["bundle"] = bundle
        points.append(point)
    points.sort(key=lambda p: p["pairs"])
    gap = base["clean_ndcg"] - base["noisy_ndcg"]
    print("| pairs | clean nDCG@10 | noisy nDCG@10 | gap won back | clean MRR@10 | noisy MRR@10 |")
    print("|---|---|---|---|---|---|")
    print(f"| 0 (base) | {base['clean_ndcg']:.4f} | {base['noisy_ndcg']:.4f} | – | {base['clean_mrr']:.4f} | {base['noisy_mrr']:.4f} |")
    for p in points:
        drop = p["clean_ndcg"] / base["clean_ndcg"] - 1
        won = (p["noisy_ndcg"] - base["noisy_ndcg"]) / gap if gap else 0.0
        print(
            f"| {p['pairs']:,} | {p['clean_ndcg']:.4f} ({drop:+.1%}) | {p['noisy_ndcg']:.4f} | {won:+.0%} "
            f"| {p['clean_mrr']:.4f} | {p['noisy_mrr']:.4f} |"
        )
    svg(points, base, out_svg)


if __name__ == "__main__":
    main(sys.argv)

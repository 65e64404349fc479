"""Table-3-style reproduction table and claim verdicts from a collected sweep."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .claims import CLAIMS
from .paper import load_table3
from .stats import combine_pvalues, intervals_overlap, mean_ci, paired_bootstrap, read_lines

ALPHA = 0.05


def _finished(df: pd.DataFrame, row: str) -> pd.DataFrame:
    return df[(df["row"] == row) & (df["status"] == "finished")]


def row_order(df: pd.DataFrame) -> list[str]:
    paper = [r["row"] for r in load_table3()]
    ours = list(dict.fromkeys(df["row"]))
    return [r for r in paper if r in ours] + [r for r in ours if r not in paper]


def significance(df: pd.DataFrame, row: str, other: str, split: str = "test", samples: int = 1000) -> float | None:
    """Paired bootstrap p-value of row against other, per seed both finished, combined (Fisher)."""
    a, b = _finished(df, row), _finished(df, other)
    pvalues = []
    for seed in sorted(set(a["seed"]) & set(b["seed"])):
        wa, wb = Path(a[a["seed"] == seed]["workdir"].iloc[0]), Path(b[b["seed"] == seed]["workdir"].iloc[0])
        ha, hb, refs = read_lines(wa / f"{split}.hyp"), read_lines(wb / f"{split}.hyp"), read_lines(wa / f"{split}.ref")
        if ha and hb and refs and len(ha) == len(hb) == len(refs):
            pvalues.append(paired_bootstrap(hb, ha, refs, samples))
    return combine_pvalues(pvalues)


def _fmt_ci(m: float, half: float | None, digits: int = 2) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "-"
    return f"{m:.{digits}f}" + (f" ± {half:.{digits}f}" if half is not None else "")


def reproduction_table(df: pd.DataFrame, samples: int = 1000) -> pd.DataFrame:
    """One line per row in the paper's order: knobs (paper units), ours (mean, 95% CI, n, delta, p), the paper's."""
    paper = {r["row"]: r for r in load_table3()}
    base = {m: mean_ci(_finished(df, "base")[m]) for m in ("dev_bleu", "dev_ppl", "test_bleu")}
    pb = paper.get("base", {})
    lines = []
    for row in row_order(df):
        sub = df[df["row"] == row]
        fin = _finished(df, row)
        first = sub.iloc[0]
        bleu, ppl, test = mean_ci(fin["dev_bleu"]), mean_ci(fin["dev_ppl"]), mean_ci(fin["test_bleu"])
        p = significance(df, row, "base", "test", samples) if row != "base" and len(fin) else None
        pr = paper.get(row, {})
        statuses = sub["status"].value_counts().to_dict()
        lines.append(
            {
                "group": first["group"],
                "row": row,
                **{k: first.get(f"paper_{k}") for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls")},
                "train_steps": first.get("paper_train_steps"),
                "steps_run": first.get("steps"),
                "n": bleu[2],
                "seeds": len(sub),
                "status": ", ".join(f"{v} {k}" for k, v in sorted(statuses.items())),
                "ppl_dev": ppl[0],
                "ppl_dev_ci": ppl[1],
                "bleu_dev": bleu[0],
                "bleu_dev_ci": bleu[1],
                "bleu_test": test[0],
                "bleu_test_ci": test[1],
                "delta_bleu": bleu[0] - base["dev_bleu"][0] if row != "base" else 0.0,
                "delta_ppl": ppl[0] - base["dev_ppl"][0] if row != "base" else 0.0,
                "p_test_vs_base": p,
                "significant": p is not None and p < ALPHA,
                "params_M": (fin["params"].mean() / 1e6) if len(fin) else float("nan"),
                "device_hours": sub["wall_seconds"].fillna(0).sum() / 3600,
                "train_flops": sub["train_flops"].fillna(0).sum(),
                "paper_ppl_dev": pr.get("ppl_dev"),
                "paper_bleu_dev": pr.get("bleu_dev"),
                "paper_params_M": pr.get("params_millions"),
                "paper_delta_bleu": (pr["bleu_dev"] - pb["bleu_dev"]) if pr and pb else None,
                "paper_delta_ppl": (pr["ppl_dev"] - pb["ppl_dev"]) if pr and pb else None,
            }
        )
    return pd.DataFrame(lines)


def _resolve(df: pd.DataFrame, name: str, metric: str) -> str:
    if not name.startswith("best:"):
        return name
    cands = [r for r in name[5:].split(",") if len(_finished(df, r))]
    if not cands:
        return name
    key = lambda r: mean_ci(_finished(df, r)[metric])[0]
    return max(cands, key=key) if metric.endswith("bleu") else min(cands, key=key)


def judge_comparison(
    df: pd.DataFrame, a: str, rel: str, b: str, metric: str, tolerance: float = 1.0, samples: int = 1000
) -> dict:
    b = _resolve(df, b, metric)
    fa, fb = _finished(df, a), _finished(df, b)
    out = {"a": a, "relation": rel, "b": b, "metric": metric}
    if not len(fa) or not len(fb):
        return {**out, "outcome": "missing", "detail": f"no finished trial of {a if not len(fa) else b}"}
    ma, mb = mean_ci(fa[metric]), mean_ci(fb[metric])
    diff = ma[0] - mb[0]
    overlap = intervals_overlap(ma, mb)
    if overlap is not None:
        significant, how = not overlap, "95% intervals " + ("overlap" if overlap else "do not overlap")
    elif metric.endswith("bleu"):
        p = significance(df, a, b, "dev", samples)
        significant, how = (None, "no hypotheses") if p is None else (p < ALPHA, f"paired bootstrap p={p:.3f}")
    else:
        significant, how = None, "one seed: no interval"
    agree = abs(diff) <= tolerance if rel == "~" else (diff < 0 if rel == "<" else diff > 0)
    detail = f"{a} {_fmt_ci(ma[0], ma[1])} vs {b} {_fmt_ci(mb[0], mb[1])} ({metric}), diff {diff:+.2f}; {how}"
    return {**out, "diff": diff, "agree": agree, "significant": significant, "detail": detail}


def judge_claims(df: pd.DataFrame, samples: int = 1000) -> pd.DataFrame:
    """held: every comparison points the paper's way and at least half of them significantly (for '~':
    no significant difference); not held: significant contradictions at least as many as significant
    agreements; otherwise (differences within the noise, or rows missing) inconclusive."""
    rows = []
    for claim in CLAIMS:
        comps = [
            judge_comparison(df, a, rel, b, m, claim.get("tolerance", 1.0), samples)
            for a, rel, b, m in claim["comparisons"]
        ]
        present = [c for c in comps if c.get("outcome") != "missing"]
        if not present:
            verdict = "not measured"
        else:
            approx = claim["comparisons"][0][1] == "~"
            agree = [c for c in present if c["agree"]]
            contra_sig = [c for c in present if not c["agree"] and c["significant"]]
            sig_agree = [c for c in agree if c["significant"]]
            if approx:
                verdict = (
                    "held"
                    if len(agree) == len(present) and not any(c["significant"] for c in present)
                    else "not held"
                    if contra_sig
                    else "inconclusive"
                )
            elif contra_sig and len(contra_sig) >= len(sig_agree):
                verdict = "not held"
            elif len(agree) == len(present) and len(sig_agree) >= len(present) / 2:
                verdict = "held"
            else:
                verdict = "inconclusive"
            if len(present) < len(comps) and verdict == "held":
                verdict = "inconclusive"
        rows.append(
            {
                "claim": claim["id"],
                "text": claim["text"],
                "verdict": verdict,
                "evidence": "; ".join(c["detail"] for c in comps),
            }
        )
    return pd.DataFrame(rows)

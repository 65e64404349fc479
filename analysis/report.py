"""report.md, a self-contained report.html (plots embedded), table.csv and table.tex."""

from __future__ import annotations

import base64
import html
import io
import json
import math
import platform
from pathlib import Path

import pandas as pd

from .collect import collect, dev_curves
from .paper import PAPER_FACTS
from .tables import judge_claims, reproduction_table

KNOB_COLS = ["N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "train_steps"]


def _num(x, digits=2, signed=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"
    return str(x)


def _ci(m, h):
    return (
        "-"
        if m is None or (isinstance(m, float) and math.isnan(m))
        else _num(m) + (f" ± {h:.2f}" if h is not None and not math.isnan(h) else "")
    )


def display_table(t: pd.DataFrame) -> pd.DataFrame:
    """The reproduction table as strings, in the paper's column order, ours beside the paper's."""
    rows = []
    for _, r in t.iterrows():
        sig = "" if r["row"] == "base" else ("*" if r["significant"] else "")
        rows.append(
            {
                "row": r["row"],
                **{k: _num(r[k]) if k not in ("P_drop", "eps_ls") else _num(r[k], 1) for k in KNOB_COLS},
                "PPL dev (ours)": _ci(r["ppl_dev"], r["ppl_dev_ci"]),
                "ΔPPL": _num(r["delta_ppl"], signed=True) if r["row"] != "base" else "",
                "PPL dev (paper)": _num(r["paper_ppl_dev"]),
                "ΔPPL paper": _num(r["paper_delta_ppl"], signed=True) if r["row"] != "base" else "",
                "BLEU dev (ours)": _ci(r["bleu_dev"], r["bleu_dev_ci"]) + sig,
                "ΔBLEU": _num(r["delta_bleu"], signed=True) if r["row"] != "base" else "",
                "BLEU dev (paper)": _num(r["paper_bleu_dev"], 1),
                "ΔBLEU paper": _num(r["paper_delta_bleu"], 1, signed=True) if r["row"] != "base" else "",
                "p (test, vs base)": _num(r["p_test_vs_base"], 3),
                "params ours (M)": _num(r["params_M"]),
                "params paper (M)": _num(r["paper_params_M"]),
                "n": f"{r['n']}/{r['seeds']}",
                "status": r["status"],
            }
        )
    return pd.DataFrame(rows)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def plots(t: pd.DataFrame, df: pd.DataFrame) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    ok = t[t["n"] > 0]
    a1.scatter(ok["params_M"], ok["bleu_dev"], color="tab:blue")
    for _, r in ok.iterrows():
        a1.annotate(r["row"], (r["params_M"], r["bleu_dev"]), fontsize=7)
    a1.set(xlabel="parameters (M), ours", ylabel="dev BLEU, ours", title="ours (at the profile's scale)")
    pp = t.dropna(subset=["paper_params_M"])
    a2.scatter(pp["paper_params_M"], pp["paper_bleu_dev"], color="tab:orange")
    for _, r in pp.iterrows():
        a2.annotate(r["row"], (r["paper_params_M"], r["paper_bleu_dev"]), fontsize=7)
    a2.set(xlabel="parameters (M), paper", ylabel="dev BLEU, paper", title="paper (newstest2013)")
    out["bleu_vs_params"] = _png(fig)

    curves = dev_curves(df)
    fig, ax = plt.subplots(figsize=(10, 4))
    for _, r in df.iterrows():
        c = curves.get(r["trial_id"])
        if c:
            ax.plot([s for s, _ in c], [b for _, b in c], marker=".", lw=1, label=f"{r['row']} s{r['seed']}")
    ax.set(xlabel="step", ylabel="dev BLEU", title="dev curves (intermediate points may use a dev subset)")
    if 0 < len(curves) <= 24:
        ax.legend(fontsize=6, ncol=4)
    out["dev_curves"] = _png(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    x = range(len(t))
    ax.bar(
        x,
        t["bleu_dev"].fillna(0),
        yerr=[h if h == h and h is not None else 0 for h in t["bleu_dev_ci"]],
        color=["tab:gray" if g == "base" else f"C{i % 10}" for i, g in enumerate(t["group"])],
        capsize=3,
    )
    ax.set_xticks(list(x), t["row"], rotation=60, fontsize=7)
    ax.set(ylabel="dev BLEU (mean, 95% CI)", title="dev BLEU per row")
    out["group_bars"] = _png(fig)
    return out


def _markdown_table(d: pd.DataFrame) -> str:
    cols = list(d.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in d.itertuples(index=False)]
    return "\n".join(lines)


def _latex(d: pd.DataFrame) -> str:
    esc = lambda s: (
        str(s)
        .replace("\\", "\\textbackslash{}")
        .replace("_", "\\_")
        .replace("%", "\\%")
        .replace("&", "\\&")
        .replace("±", "$\\pm$")
        .replace("Δ", "$\\Delta$")
    )
    lines = [
        "\\begin{tabular}{" + "l" * len(d.columns) + "}",
        "\\hline",
        " & ".join(esc(c) for c in d.columns) + " \\\\",
        "\\hline",
    ]
    lines += [" & ".join(esc(v) for v in row) + " \\\\" for row in d.itertuples(index=False)]
    return "\n".join(lines + ["\\hline", "\\end{tabular}", ""])


def header(sweep_dir: Path, df: pd.DataFrame) -> dict:
    state = json.loads((sweep_dir / "sweep.json").read_text())
    fin = df[df["status"] == "finished"]
    first = fin.iloc[0] if len(fin) else None
    return {
        "sweep": state["name"],
        "spec": state.get("spec"),
        "profile": state["profile"],
        "profile_rules": state.get("profile_rules"),
        "corpus": None if first is None else first["corpus"],
        "corpus_fingerprint": None if first is None else first["corpus_fingerprint"],
        "hardware": f"{platform.machine()}, {fin['device'].iloc[0] if len(fin) else '?'}"
        " {fin['precision'].iloc[0] if len(fin) else ''}",
        "torch": None if first is None else first["torch_version"],
        "trials": len(df),
        "finished": len(fin),
        "device_hours": df["wall_seconds"].fillna(0).sum() / 3600,
        "train_flops": df["train_flops"].fillna(0).sum(),
        "sacrebleu": None if first is None else first["sacrebleu_signature"],
    }


def write_report(sweep_dir: str | Path, out_dir: str | Path | None = None, samples: int = 1000) -> Path:
    """Write the report; a sweep at a URI is read from a pulled view and the report is pushed to URI/report too."""
    from sweeps.storage import open_storage

    store = open_storage(str(sweep_dir))
    sweep_dir = store.view() if store else Path(sweep_dir)
    df = collect(sweep_dir)
    out = Path(out_dir) if out_dir else sweep_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    t = reproduction_table(df, samples)
    d = display_table(t)
    claims = judge_claims(df, samples)
    h = header(sweep_dir, df)
    imgs = plots(t, df)
    t.to_csv(out / "table.csv", index=False)
    (out / "table.tex").write_text(_latex(d))
    problems = df[df["status"] != "finished"][["trial_id", "row", "seed", "status", "reason"]]
    facts = (
        f"Sweep **{h['sweep']}** ({h['spec']}), profile **{h['profile']}**:"
        f" {h['finished']}/{h['trials']} trials finished; "
        f"corpus {h['corpus']} (fingerprint {h['corpus_fingerprint']}); {h['hardware']}, torch {h['torch']}; "
        f"{h['device_hours']:.2f} device-hours, {h['train_flops']:.2e} training FLOPs (6 x params x tokens). "
        f"Paper: base {PAPER_FACTS['train_flops']['base']:.1e} FLOPs,"
        f" big {PAPER_FACTS['train_flops']['big']:.1e} (Table 2), "
        f"dev set {PAPER_FACTS['dev_set']}, vocabulary ~{PAPER_FACTS['vocab']:,}."
    )
    notes = (
        "Ours: mean over finished seeds, ± half-width of the 95% t-interval (two or more seeds). "
        "Δ: against the base row of the same column. * : test BLEU differs from base with p < 0.05 "
        "(sacrebleu paired bootstrap, 1000 samples, per seed, combined by Fisher's method). "
        "Knobs are in the paper's units; the profile's rules say how they were scaled. "
        "Perplexities are per wordpiece of different vocabularies and are not comparable with the paper's."
    )
    md = [
        f"# Table 3 reproduction: {h['sweep']}",
        "",
        facts,
        "",
        f"Profile rules: `{json.dumps(h['profile_rules'])}`",
        "",
        "## Variations on the Transformer (Table 3 layout)",
        "",
        _markdown_table(d),
        "",
        notes,
        "",
        "## The paper's claims, judged on these results",
        "",
        _markdown_table(claims),
        "",
        "## Failed, stopped or missing trials",
        "",
        _markdown_table(problems) if len(problems) else "None: every trial finished.",
        "",
        "## Plots",
        "",
        "See report.html (BLEU against parameters, dev curves, per-row bars).",
        "",
        f"sacrebleu: `{h['sacrebleu']}`",
        "",
    ]
    (out / "report.md").write_text("\n".join(md))
    body = [
        f"<h1>Table 3 reproduction: {html.escape(h['sweep'])}</h1>",
        f"<p>{html.escape(facts).replace('**', '')}</p>",
        f"<p><code>{html.escape(json.dumps(h['profile_rules']))}</code></p>",
        "<h2>Variations on the Transformer (Table 3 layout)</h2>",
        d.to_html(index=False, escape=True),
        f"<p>{html.escape(notes)}</p>",
        "<h2>The paper's claims, judged on these results</h2>",
        claims.to_html(index=False, escape=True),
        "<h2>Failed, stopped or missing trials</h2>",
        problems.to_html(index=False) if len(problems) else "<p>None: every trial finished.</p>",
        "<h2>Plots</h2>",
    ]
    body += [f'<h3>{k.replace("_", " ")}</h3><img alt="{k}" src="data:image/png;base64,{v}">' for k, v in imgs.items()]
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:3px 6px}img{max-width:100%}"
    )
    (out / "report.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(h['sweep'])}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
    )
    if store and not out_dir:
        store.push(out, "report")
    return out

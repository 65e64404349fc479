"""The report of a Table 3 sweep as one object: collected, judged and built once (``build``), then drawn by the
writers (analysis.report.writers: markdown, CSV, LaTeX; analysis.report.html_report: HTML), which compute nothing
of their own.

The words every format shares (legend, decision rule, the budget lines of the header, the notes under the table)
are made here from the model, so that the formats cannot disagree.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.data.adaptive_record import StopReason, read_adaptive
from analysis.data.claims import BLEU_ONLY, budget_unreached
from analysis.data.collect import collect, precisions
from analysis.data.metrics import LOG_COLUMNS, QUALITY, READINGS, for_task, get_reading, sweep_task
from analysis.data.paper import PAPER_FACTS
from analysis.data.sweep_record import ReportShape, require_record
from analysis.stats.comparisons import seed_correlation
from analysis.stats.rule import Rule, sweep_rule
from analysis.stats.scale import NOT_MEASURABLE, scale_guard
from analysis.stats.seed_noise import Noise
from analysis.stats.stability import unstable_counts, unstable_line
from analysis.stats.trajectory import REGIME_DROP_NATS, points, regime
from analysis.stats.verdicts import Verdict
from transformer_core.errors import UserError
from transformer_core.formatting import MISSING, is_missing, number
from transformer_core.knobs import knob
from transformer_core.rundir import Status

from .evalsets import EvalSetsReport, evaluation_sets, report_rule
from .plots import figures
from .reach import reach_lines
from .tables import judge_report, reproduction_table, shown_noise

LEGEND = [
    ("held", "✓", "every comparison of the claim is decided on the paper's side (or, for '~', inside the margin)"),
    ("contradicted", "✗", "comparisons are decided on the other side, none on the paper's"),
    ("mixed", "±", "some comparisons are decided on the paper's side and some on the other"),
    ("within noise", "≈", "no comparison is decided at this budget: see the difference the table could detect"),
    ("incomplete", "?", "a row of the claim (or a 'best of' candidate) has no finished trial"),
    (
        "unstable",
        "⚠",
        "the effect changed between a point in the last half of the budget and the end, decided "
        "over the report's family of such changes",
    ),  # fmt: skip
]


def legend(paper_claims: bool = True) -> list[tuple[str, str, str]]:
    """The verdicts' legend: ``LEGEND`` for the paper's claims, with "the claim's side" for a spec's own."""
    if paper_claims:
        return LEGEND
    return [(n, s, w.replace("the paper's side", "the claim's side")) for n, s, w in LEGEND]


RULE = (
    "The multiple-testing procedure decides, not the intervals: each comparison is a t-test of the difference of "
    "seed means (two one-sided tests for '~', against the claim's margin) with moderated seed variances, its p "
    "multiplied by the candidates of a 'best of' and by the looks charged; then {procedure}. The interval printed "
    "with each comparison is at 1 - α/(candidates x looks) (its level is printed with it): it can exclude 0 while "
    "the procedure, which accounts for the whole family, leaves the comparison within noise. Evidence lists each "
    "comparison's own outcome. 'Detectable' is the smallest true difference the comparison would detect with 80% "
    "power at its seeds and the family's threshold. The sentence-sampling p (paired bootstrap of test hypotheses) "
    "is test-set noise of single models and never decides a verdict. The trajectory's earlier points are "
    "exploratory: judged at the report's cutoff but not in its family; only the final point is decided."
)
VERSUS_RULE = (
    "Rows that no claim of the paper covers, each against base: the difference of seed means, two-sided (no "
    "direction was predicted), decided in the report's family with the claims (see the decision rule above). "
    "Judged again at every evaluation point the trials share; the last is the sweep's answer, at its budget (the "
    "earlier points are exploratory, outside the report's family)."
)
NOTES = (
    "Ours: mean over finished seeds ± half-width of its 95% interval from the seed-noise model (the row's "
    "moderated variance; every seed's value is in seeds.csv). "
    "Δ: against the base row of the same column; perplexity differences are in ln PPL (nats), "
    "which is what the verdicts test. Knobs are in the paper's units; the profile's rules say how they were "
    "scaled. Perplexities are per wordpiece of different vocabularies and are not comparable with the paper's."
)
PAPER_PPL = " Perplexities are per wordpiece of different vocabularies and are not comparable with the paper's."
LM_NOTES = (
    " Bits per byte: the dev/test text's summed NLL / (ln 2 x its UTF-8 bytes, a newline per line), "
    "independent of the tokenizer. The paper's columns are its translation (MT) numbers: a reference for "
    "the direction of each effect only."
)
PAPER_COLUMNS = ("paper_ppl_dev", "paper_bleu_dev", "paper_params_M", "paper_delta_bleu", "paper_delta_ce")
UNJUDGED = (Verdict.NOT_MEASURED.value, Verdict.INCOMPLETE.value)  # a claim-reading with no verdict yet


@dataclass
class ReportModel:
    """Everything the report of one sweep shows, computed once by ``build``."""

    sweep_dir: Path
    frame: pd.DataFrame  # analysis.data.collect: one line per trial (every seed, whatever its status)
    header: dict  # the sweep's facts: name, spec, profile, corpus, hardware, budget, totals, adaptive record
    rule: Rule  # how verdicts are decided (family, procedure, looks charged)
    lm: bool  # a language-model sweep (task lm): no BLEU, chrF or evaluation sets; test PPL in the table
    noise: dict[str, Noise]  # the seed-noise model per reading, over the sweep's rows (final values)
    regime: dict  # trajectory.regime: is the base still improving at the end (undertrained flag)
    pairing: list[tuple[str, float, int]]  # per reading: (label, seed correlation with base, independent pairs)
    table: pd.DataFrame  # tables.reproduction_table: one line of numbers per row (table.csv)
    display: pd.DataFrame  # the same as strings in the Table 3 layout, evaluation-set columns included
    claims: pd.DataFrame  # the paper's claims judged on dev (with their trajectories; claims.csv)
    versus: pd.DataFrame  # rows no claim covers, each against base (versus-base.csv); empty when there are none
    evalsets: EvalSetsReport | None  # test and the named evaluation sets (None in a language-model sweep)
    problems: pd.DataFrame  # failed, stopped or missing trials with their reasons
    seeds: pd.DataFrame  # every seed of every row (seeds.csv)
    images: dict[str, str]  # figure title -> PNG, base64 (analysis.report.plots)
    shape: ReportShape = field(default_factory=ReportShape)  # the spec's title, description, claims and paper rows

    @property
    def header_noise(self) -> dict[str, Noise]:
        """The readings the header describes the seed noise of, in its order."""
        return {r: self.noise[r] for r in for_task(sweep_task(self.frame)).readings}

    @property
    def rule_text(self) -> str:
        return RULE.format(procedure=self.rule.describe())

    @property
    def notes(self) -> str:
        """The paragraph under the main table: what its numbers are."""
        papers = self.shape.papers  # else no row shows the paper's numbers: nothing to compare them with
        notes = NOTES if papers else NOTES.replace(PAPER_PPL, " Perplexities are per wordpiece of this vocabulary.")
        if not self.lm:
            return notes
        lm = notes.replace("Perplexities are", "Perplexities (per BPE piece of the modelled side, EOS included) are")
        return lm + (LM_NOTES if papers else LM_NOTES.split(" The paper's columns")[0])

    @property
    def versus_rule(self) -> str:
        """The paragraph over the rows against base."""
        return VERSUS_RULE if self.shape.paper_claims else VERSUS_RULE.replace("no claim of the paper", "no claim")

    @property
    def csv_table(self) -> pd.DataFrame:
        """table.csv: the table's numbers, without the paper's columns where no row shows the paper's numbers."""
        if self.shape.papers:
            return self.table
        return self.table.drop(columns=[c for c in PAPER_COLUMNS if c in self.table])

    @property
    def set_claims(self) -> dict[str, pd.DataFrame]:
        """{set: its claims table} for test and each named evaluation set."""
        return self.evalsets.claims if self.evalsets else {}

    def budget_lines(self) -> list[str]:
        """The header's lines on what the verdicts hold at: budget, rule, seed noise, pairing, regime, seeds added."""
        judged = set(self.claims.loc[~self.claims["verdict"].isin(UNJUDGED), "claim"]) if len(self.claims) else set()
        lines = budget_lines(self.header, self.header_noise, self.regime, self.pairing, self.rule, judged)
        lines = scale_guard(self.frame).header_lines(list(self.header_noise)) + lines  # the scale guard first
        lines += self.shape.amended_lines()
        lines += self.reach_lines()
        flags = unstable_counts(self.claims, self.versus, list(self.shape.claims))
        line = unstable_line(flags["flagged"], flags["units"], int(self.claims.attrs.get("unstable_tests", 0)),
                             self.rule.alpha)  # fmt: skip
        return lines + [x for x in [line] if x]

    def reach_lines(self) -> list[str]:
        """The header's line where the rule falls short of 80% power at 3 seed sd at the seeds a row was given (the
        adaptive max, else the most a row has) in the report's family (analysis.report.reach); none where it reaches
        it."""
        fin = self.frame[self.frame["status"] == Status.FINISHED]
        if not self.rule.size or self.rule.method != "bh" or fin.empty:
            return []
        ad = read_adaptive(self.header.get("adaptive"))
        seeds = int((ad.max if ad else None) or fin.groupby("row").size().max())
        units = {"dev_bleu": "BLEU", "dev_ce": "nats"}
        sigma = {u: self.noise[r].sigma for r, u in units.items() if r in self.noise}
        found = reach_lines(self.rule.evidence, seeds, self.rule.size, int(fin["row"].nunique()), self.rule.looks,
                            sigma, always=False)  # fmt: skip
        return [f"**Reach**: {x}" for x in found]


def build(sweep_dir: str | Path, samples: int = 1000, family: str = "report", method: str = "bh",
          evidence: str | None = None) -> ReportModel:  # fmt: skip
    """Collect the sweep, judge it, and hold every number and table the report shows."""
    sweep_dir = Path(sweep_dir)
    df = collect(sweep_dir)
    if df.empty:
        raise UserError(f"sweep {str(sweep_dir)!r} has no trials yet (its plan is empty, or none is readable): "
                        "nothing to report; run or resume it with `tsweep run SPEC --out DIR --resume`")  # fmt: skip
    h = header(sweep_dir, df)
    shape, stated = h["shape"], list(h["shape"].claims)
    rule = sweep_rule(h.get("adaptive"), family, method, evidence)
    rule = report_rule(df, sweep_dir, rule, stated)
    task = for_task(sweep_task(df))
    lm = task.name == "lm"
    noise = shown_noise(df, stated)  # as the verdicts use it: dev's readings as one table
    t = reproduction_table(df, samples, noise=noise, paper_rows=shape.paper)
    pts = points(df)  # every evaluation point the trials share: the regime and the trajectories read them
    reg = regime(df, pts=pts)
    shown = task.readings  # the readings the header describes
    pairing = [(get_reading(r).label, *seed_correlation(df, r)) for r in QUALITY if r in shown]
    claims, vb = judge_report(df, rule, reg=reg, pts=pts, claims=stated)
    # chrF, test and the named sets
    sets = evaluation_sets(df, sweep_dir, rule, reg=reg, stated=stated) if task.evaluation_sets else None
    d = display_table(t, task.name)
    if sets is not None:
        d = d.merge(sets.columns, on="row", how="left")
    return ReportModel(sweep_dir, df, h, rule, lm, noise, reg, pairing, t, d, claims, vb, sets, problems(df, h),
                       seed_table(df), figures(t, df, noise=noise), shape)  # fmt: skip


def problems(df: pd.DataFrame, h: dict) -> pd.DataFrame:
    """Trials that did not finish, with their reason (a wall-clock budget stop where the trial gives none), and
    finished trials whose worker failed first (result.json's ``faults``)."""
    out = df[df["status"] != Status.FINISHED][["trial_id", "row", "seed", "status", "reason"]].copy()
    ad = read_adaptive(h.get("adaptive"))
    spent = ad is not None and ad.stop is StopReason.BUDGET_SPENT
    why = "the wall-clock budget was spent before it finished" if spent else ""
    out["reason"] = [r if isinstance(r, str) and r else why for r in out["reason"]]
    if "faults" in df:  # finished, but only after its worker failed (Ray's memory monitor, an error) and was replaced
        retried = df[(df["status"] == Status.FINISHED) & df["faults"].apply(lambda x: isinstance(x, str) and bool(x))]
        if len(retried):
            more = retried[["trial_id", "row", "seed", "status", "faults"]].rename(columns={"faults": "reason"})
            more["status"] = "finished after a retry"
            more["reason"] = "retried after: " + more["reason"]
            out = pd.concat([out, more], ignore_index=True)
    return out


def cell(x, digits=2, signed=False) -> str:
    """A table cell: a float to ``digits`` places (with its sign where ``signed``), anything else as written."""
    if isinstance(x, float):
        return number(x, f"+.{digits}f" if signed else f".{digits}f")
    return number(x)


def _ci(m, h, digits=2):
    if is_missing(m):
        return MISSING
    return cell(m, digits) + ("" if is_missing(h) else f" ± {h:.{digits}f}")


def display_table(t: pd.DataFrame, task: str) -> pd.DataFrame:
    """The reproduction table as strings: knobs (paper units), ours beside the paper's.  A language-model
    sweep (task lm) shows bits per byte and test perplexity where a translation sweep shows BLEU; its paper
    columns are the paper's translation (MT) numbers: the direction of each effect, not comparable values.
    ``task``: the sweep's (analysis.data.metrics.sweep_task)."""
    knobs = t.attrs.get("knobs", [])
    lm = task == "lm"
    mt = " (MT)" if lm else ""  # a language model's paper columns are the paper's translation numbers
    rows = []
    for _, r in t.iterrows():
        base = r["row"] == "base"
        lm_columns = {
            "bits/byte dev": _ci(r["bpb_dev"], r["bpb_dev_ci"], 3),
            "bits/byte test": _ci(r["bpb_test"], r["bpb_test_ci"], 3),
            "PPL test": cell(r["ppl_test"]),
        } if lm else {}  # fmt: skip
        bleu_columns = {} if lm else {
            "BLEU dev (ours)": _ci(r["bleu_dev"], r["bleu_dev_ci"]),
            "ΔBLEU": "" if base else cell(r["delta_bleu"], signed=True),
            "BLEU dev (paper)": cell(r["paper_bleu_dev"], 1),
            "ΔBLEU paper": "" if base else cell(r["paper_delta_bleu"], 1, signed=True),
            "BLEU test": _ci(r["bleu_test"], r["bleu_test_ci"]),
            "sentence-sampling p (test)": cell(r["p_sentence_test"], 3),
        }  # fmt: skip
        rows.append(
            {
                "row": r["row"],
                **{knob(k).label: knob(k).format(r[k]) for k in knobs},
                "PPL dev (ours)": cell(r["ppl_dev"]),
                "ln PPL ± CI": _ci(r["ce_dev"], r["ce_dev_ci"], 3),
                "Δ ln PPL": "" if base else cell(r["delta_ce"], 3, signed=True),
                **lm_columns,
                "PPL dev (paper)" + mt: cell(r["paper_ppl_dev"]),
                "Δ ln PPL paper" + mt: "" if base else cell(r["paper_delta_ce"], 3, signed=True),
                **bleu_columns,
                "params ours (M)": cell(r["params_M"]),
                "params paper (M)": cell(r["paper_params_M"]),
                "n": f"{r['n']}/{r['seeds']}",
                "status": r["status"],
            }
        )
    out = pd.DataFrame(rows)
    paper = [c for c in t if c.startswith("paper_") and c[6:] not in knobs]
    if len(t) and paper and not t[paper].notna().any().any():  # no row names a paper row: no paper columns
        out = out.drop(columns=[c for c in out if "paper" in c])
    return out


def _first(fin: pd.DataFrame, col: str):
    return fin[col].dropna().iloc[0] if col in fin and fin[col].notna().any() else None


def header(sweep_dir: Path, df: pd.DataFrame) -> dict:
    state = require_record(sweep_dir, repr(str(sweep_dir)))  # read once per report (analysis.data.files.read_once)
    fin = df[df["status"] == Status.FINISHED]
    base = fin[fin["row"] == "base"]
    ran = fin if len(fin) else df[df["status"] == Status.DIVERGED]  # all diverged: their result.json has the facts
    ref = base if len(base) else ran
    tokens = (_first(ref, "tokens_per_batch") or 0) * (_first(ref, "accumulate") or 1)
    return {
        "sweep": state.name,
        "spec": state.spec,
        "profile": state.profile,
        "profile_rules": state.get("profile_rules"),
        "corpus": _first(ran, "corpus"),
        "corpus_fingerprint": _first(ran, "corpus_fingerprint"),
        "hardware": f"{platform.machine()}, {_first(ran, 'device') or '?'} {precisions(ran)}" + _step(ran),
        "torch": _first(ran, "torch_version"),
        "trials": len(df),
        "finished": len(fin),
        "device_hours": df["wall_seconds"].fillna(0).sum() / 3600,
        "largest_memory": largest_memory(df),
        "train_flops": df["train_flops"].fillna(0).sum(),
        "sacrebleu": _first(fin, "sacrebleu_signature"),
        "budget": f"{_first(ref, 'steps')} steps x {f'{int(tokens):,}' if tokens else '?'} target tokens per step, "
        f"schedule {_first(ref, 'schedule') or 'rsqrt'}",
        "adaptive": state.adaptive,  # typed (old records migrated)
        "shape": state.shape(),
    }


def largest_memory(df: pd.DataFrame) -> str:
    """'largest trial 0.78 GB resident (A3 s1)' from the trials' recorded peaks (and CUDA's), or '' where none
    recorded one (results from before trials measured it)."""
    parts = []
    for col, what in (("peak_rss_gb", "resident"), ("peak_cuda_gb", "CUDA")):
        values = pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(dtype=float)
        if values.notna().any():
            i = values.idxmax()
            parts.append(f"{values[i]:.2f} GB {what} ({df.at[i, 'row']} s{df.at[i, 'seed']})")
    return f"largest trial {', '.join(parts)}" if parts else ""


def _step(ran: pd.DataFrame) -> str:
    """How the trials' steps ran (compile mode, Adam kernel, the dropout masks where any trial used the int32
    ones, packed batches and a bf16 residual stream where any trial trained so), where their results record it;
    mixed modes listed."""
    parts = []
    if "fast_dropout" in ran and not ran["fast_dropout"].fillna(False).astype(bool).any():
        ran = ran.drop(columns="fast_dropout")  # torch's masks, the default: nothing to say
    if "loss_kernel" in ran and not (ran["loss_kernel"].dropna() != "plain").any():
        ran = ran.drop(columns="loss_kernel")  # the plain projection and loss, the default: nothing to say
    packed = list(dict.fromkeys(v for v in ran.get("packing", pd.Series(dtype=object)).dropna() if v != "off"))
    ran = ran.drop(columns="packing", errors="ignore")
    words = {"fused_adam": ("fused", "loop"), "fast_dropout": ("int32", "torch")}
    for col, name in (("compile", "compile {}"), ("fused_adam", "{} Adam"), ("fast_dropout", "{} dropout masks"),
                      ("loss_kernel", "{} loss")):  # fmt: skip
        if col not in ran:
            continue
        seen = list(dict.fromkeys(ran[col].dropna()))
        if col in words:
            seen = list(dict.fromkeys(words[col][0] if bool(v) else words[col][1] for v in seen))
        if seen:
            parts.append(name.format("/".join(str(v) for v in seen)))
    if packed:  # packed trials draw other batches and dropout masks than padded ones of the same seed
        parts.append(f"packed batches ({'/'.join(packed)} attention): another random stream than padded batches")
    streams = ran.get("residual_dtype", pd.Series(dtype=object)).dropna()
    if (streams == "bf16").any():  # rounds what the fp32 stream keeps: said where any trial did
        parts.append(f"residual stream in bf16 ({int((streams == 'bf16').sum())} of {len(ran)} trials)")
    return f" (step: {', '.join(parts)})" if parts else ""


def facts(h: dict) -> str:
    """The report's first paragraph (markdown): the sweep, its trials, corpus, hardware and cost, the paper's."""
    return (
        f"Sweep **{h['sweep']}** ({h['spec']}), profile **{h['profile']}**: {h['finished']}/{h['trials']} trials "
        f"finished; corpus {h['corpus']} (fingerprint {h['corpus_fingerprint']}); {h['hardware']}, torch {h['torch']}; "
        f"{h['device_hours']:.2f} device-hours, {h['train_flops']:.2e} training FLOPs (6 x params x tokens)"
        + (f", {h['largest_memory']}" if h.get("largest_memory") else "")
        + "."
        + (
            f" Paper: base {PAPER_FACTS['train_flops']['base']:.1e} FLOPs, big {PAPER_FACTS['train_flops']['big']:.1e} "
            f"(Table 2), dev set {PAPER_FACTS['dev_set']}, vocabulary ~{PAPER_FACTS['vocab']:,}."
            if (h.get("shape") or ReportShape()).papers
            else ""
        )
    )


def budget_lines(h: dict, noise: dict, reg: dict, pairing: list[tuple[str, float, int]], rule: Rule,
                 judged: frozenset | set = frozenset()) -> list[str]:  # fmt: skip
    """``judged``: the claims the table judges (a stop record from before a later session may call them
    unreached: that session was stopped without writing its own)."""
    lines = [f"**Budget** (every verdict below holds at this budget only): {h['budget']}, profile {h['profile']}."]
    lines.append(f"**Decision rule**: {rule.describe()}.")
    parts = [f"{get_reading(r).label}: {n.describe()}" for r, n in noise.items()]
    lines.append(
        "**Seed noise** (moderated: each row's variance shrunk toward a prior fitted to all rows', of df "
        "d0; a row's own kept where beyond the prior's 90th percentile): " + "; ".join(parts) + "."
    )
    lines.append(
        "**Seed pairing**: correlation of a row's seed-k deviation with base's at the same seed: "
        + "; ".join(f"{lab} {c:+.2f} ({n} independent pairs)" if c == c else f"{lab}: too few pairs"
                    for lab, c, n in pairing)
        + ". The tests treat rows as independent samples: conservative where this is positive, somewhat "
        "liberal where it is negative."
    )  # fmt: skip
    if reg.get("measured"):
        flag = "**undertrained regime**" if reg["undertrained"] else "not flagged as undertrained"
        lines.append(
            f"**Regime**: {flag}: {reg['detail']}. Capacity and regularisation claims carry the caveat "
            f"when the base is still improving by more than {REGIME_DROP_NATS} nats over the last third."
        )
    else:
        lines.append(f"**Regime**: not measured ({reg['detail']}).")
    ad = read_adaptive(h.get("adaptive"))
    if ad:
        stopped = "not yet" if ad.stopped is None else ad.stopped
        if judged & set(ad.unreached):
            stopped += (" (recorded by an earlier session: a later one ran more trials and was stopped before it "
                        "wrote its own record; the trial count above is the table's)")  # fmt: skip
        spending = (
            f"Looks charged: {rule.looks} (each comparison's p multiplied by it). Spending rule: every planned look "
            "is charged (Bonferroni over them, valid however the loop stopped), a wall-clock budget stop included: "
            "whether the next round fits depends on how many rows are undecided, so the data choose that stop too; "
            "one look where the session stopped (a signal, or the budget) during the minimum seeds, before the first."
            if rule.evidence == "p"
            else "Looks charged: none: the e-values are valid however the rounds stopped ('~' comparisons excepted: "
            "their e-value is calibrated from a fixed-seed p)."
        )
        lines.append(
            f"**Adaptive seeds**: min {ad.min}, max {ad.max}, {ad.looks} planned looks; "
            f"{len(ad.rounds)} rounds added seeds; stopped: {stopped}. {spending}"
        )
        for rnd in ad.rounds:
            added = ", ".join(f"{row} ({why})" for row, why in rnd.get("added", {}).items())  # typed: read_adaptive
            lines.append(f"- round {rnd.get('round', '?')}: one more seed for {added}")
    lines += budget_unreached(ad, judged)  # claims a spent budget did not reach: "not measured: budget"
    return lines


def seed_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every seed of every row with its status and readings (seeds.csv): what the means and verdicts are made of."""
    read = dict.fromkeys(r.column for r in READINGS.values())  # the columns every reading is read from
    cols = [c for c in ("row", "seed", "trial_id", "status", *read, "wall_seconds", "reason") if c in df]
    out = df[cols].copy()
    for r in READINGS.values():  # a reading of a logged column beside it (dev_ce = ln dev_ppl)
        if r.column in LOG_COLUMNS and r.column in out:
            out.insert(out.columns.get_loc(r.column) + 1, r.name, np.log(pd.to_numeric(out[r.column], errors="coerce")))
    return out.sort_values(["row", "seed"], kind="stable")


def measured(claims: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The claims this sweep measured, and one line naming those it did not: rows it did not run, or (a
    language-model sweep) claims stated only in BLEU."""
    out = claims[claims["verdict"] != "not measured"]
    absent = claims[claims["verdict"] == "not measured"]
    bleu_only = absent["summary"] == BLEU_ONLY
    missing, bleu = (list(dict.fromkeys(absent.loc[m, "claim"])) for m in (~bleu_only, bleu_only))
    lines = [f"Claims not measured (no finished trial of their rows): {', '.join(missing)}."] if missing else []
    lines += [f"Claims not measured ({BLEU_ONLY}): {', '.join(bleu)}."] if bleu else []
    return out, " ".join(lines)


def versus_summary(vb: pd.DataFrame) -> list[str]:
    """One line per reading: rows better / worse than base beyond seed noise, within noise, not judged."""
    lines = []
    for reading, part in vb.groupby("reading", sort=False):
        said = []
        for label, outcomes in (
            ("better than base beyond seed noise", ("better than base",)),
            ("worse than base beyond seed noise", ("worse than base",)),
            ("within seed noise", ("within noise",)),
            ("diverged", ("diverged",)),
            ("not judged (no seed replicates)", ("no replicates",)),
            ("not judged (no seed noise: the seeds' readings agree exactly)", ("no seed noise: cannot decide",)),
            ("not measured", ("missing",)),
            (NOT_MEASURABLE, (NOT_MEASURABLE,)),
        ):
            rs = list(part.loc[part["outcome"].isin(outcomes), "row"])
            if rs:
                said.append(f"{label}: {', '.join(rs)}")
        lines.append(f"{reading}: " + "; ".join(said) + ".")
    return lines

"""A trained run put to use: its averaged checkpoint, its own vocabulary and decoding settings.

``load_trained(run_dir)`` rebuilds the model that produced the run's test BLEU (the average of the
checkpoints named in result.json's ``averaged_checkpoints``), with the run's sentencepiece model and
beam settings.  ``TrainedModel.translate`` turns lines into detokenised translations like dev.hyp;
``evaluate_run`` scores a run on an EvalSet and writes, under the run,

    evals/NAME.json   BLEU and chrF with their sacrebleu signatures, PPL, the set's fingerprint,
                      unseen characters, the checkpoints used
    evals/NAME.hyp    the translations, one line per source line

A run already scored on a set with the same fingerprint (and the same checkpoints) is skipped.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from . import rundir
from .data import PAD, UNK, load_corpus
from .data.clean import normalize
from .data.corpus import EncodedSplit
from .data.eval_set import EvalSet
from .device import resolve_device, resolve_precision
from .evaluation import bleu, chrf, perplexity, translate
from .finished import RunNotUsable, done_evaluation, eval_paths, read_run
from .layers import set_residual_dtype
from .model import Transformer, build_model
from .optim import average_state_dicts
from .run_config import RunConfig
from .tracking import Tracker

log = logging.getLogger(__name__)

_NO_IDS = np.zeros(0, dtype=np.int32)


@dataclass
class Encoded:
    ids: list[np.ndarray]
    unknown_pieces: int
    unknown_chars: int


@dataclass
class TrainedModel:
    run_dir: Path
    config: RunConfig
    result: dict
    model: Transformer
    processor: object  # sentencepiece.SentencePieceProcessor
    device: torch.device
    precision: str
    known_chars: frozenset

    @property
    def max_source(self) -> int:
        """Source pieces that fit the model's positions with the EOS appended."""
        return self.model.cfg.max_len - 1

    def encode(self, lines: list[str]) -> Encoded:
        """Piece ids per line; characters never seen in training become the unknown piece (and are counted)."""
        ids = [np.asarray(x, dtype=np.int32) for x in self.processor.encode(lines)] if lines else []
        chars = sum(1 for line in lines for ch in line if not ch.isspace() and ch not in self.known_chars)
        return Encoded(ids, int(sum(int((x == UNK).sum()) for x in ids)), chars)

    def truncate(self, ids: list[np.ndarray], lines: list[int], what: str) -> int:
        """Cut sources longer than the model's maximum length, with a warning naming each line; returns how many."""
        cut = 0
        for k, x in enumerate(ids):
            if len(x) > self.max_source:
                log.warning(
                    "%s line %d: %d pieces, longer than the model's maximum of %d: truncated",
                    what,
                    lines[k],
                    len(x),
                    self.max_source,
                )
                ids[k], cut = x[: self.max_source], cut + 1
        return cut

    def _decode(self, src: list[np.ndarray]) -> list[str]:
        t = self.config.train
        split = EncodedSplit(src, [_NO_IDS] * len(src), [""] * len(src), [""] * len(src))
        return translate(
            self.model,
            split,
            self.processor,
            self.device,
            self.precision,
            t.beam,
            t.alpha,
            t.max_extra,
            stop=t.beam_stop,
        )

    def translate(self, lines: list[str], first_line: int = 1, what: str = "input") -> list[str]:
        """Detokenised beam-search translations in order; an empty line stays empty, a long one is truncated."""
        texts = [normalize(line) for line in lines]
        todo = [i for i, text in enumerate(texts) if text]
        out = [""] * len(lines)
        if todo:
            ids = self.encode([texts[i] for i in todo]).ids
            self.truncate(ids, [first_line + i for i in todo], what)
            for i, hyp in zip(todo, self._decode(ids)):
                out[i] = hyp
        return out

    def score(self, es: EvalSet) -> tuple[dict, list[str]]:
        """BLEU, chrF (over every line: an empty source scores an empty translation) and PPL (over the pairs
        with both sides non-empty) on ``es``, and the translations."""
        src, ref = self.encode(es.source), self.encode(es.reference)
        todo = [i for i, s in enumerate(es.source) if s]
        src_ids = [src.ids[i] for i in todo]
        truncated = self.truncate(src_ids, [i + 1 for i in todo], f"evaluation set {es.name}")
        hyps = [""] * len(es)
        for i, hyp in zip(todo, self._decode(src_ids)):
            hyps[i] = hyp
        pairs = [(k, i) for k, i in enumerate(todo) if es.reference[i]]
        split = EncodedSplit(
            [src_ids[k] for k, _ in pairs], [ref.ids[i] for _, i in pairs], [""] * len(pairs), [""] * len(pairs)
        )
        ppl = perplexity(self.model, split, self.device, self.precision) if pairs else float("nan")
        b, b_sig = bleu(hyps, es.reference)
        c, c_sig = chrf(hyps, es.reference)
        scores = {
            "bleu": b,
            "sacrebleu_signature": b_sig,
            "chrf": c,
            "chrf_signature": c_sig,
            "ppl": ppl,
            "unknown_chars": {"source": src.unknown_chars, "reference": ref.unknown_chars},
            "unknown_pieces": {"source": src.unknown_pieces, "reference": ref.unknown_pieces},
            "empty_sources": len(es) - len(todo),
            "truncated_sources": truncated,
        }
        return scores, hyps


def _data_dir(config: RunConfig, data_dir) -> Optional[str]:
    """--data-dir, else the run's own data directory where it still exists, else the default."""
    if data_dir:
        return str(data_dir)
    own = config.data.data_dir
    return own if own and Path(own).is_dir() else None


def _first(exc: BaseException) -> str:
    """'Type: the first sentence of its message' (torch's run on for paragraphs)."""
    text = str(exc).strip().splitlines()
    first = text[0].split(". ")[0].rstrip(".")[:160] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _checkpoint_weights(run_dir: Path, path: Path) -> dict:
    """The model weights of one checkpoint, loaded as tensors only (never unpickling code); one line when it is
    truncated, garbage, a pickle of something else, or lacks the weights."""
    try:
        with warnings.catch_warnings():  # torch warns about a foreign pickle's protocol before refusing it
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
        weights = state["model"]
        if not isinstance(weights, dict):
            raise TypeError("'model' is not a state dict")
        return weights
    except Exception as exc:  # whatever is in the file, it is not a checkpoint this run can use
        raise RunNotUsable(
            f"run {str(run_dir)!r}: checkpoint {path.name} is unreadable ({_first(exc)}): it is truncated or"
            " not a checkpoint of this run; train the run again (or restore the file)"
        ) from None


def load_trained(run_dir, device: str = "auto", data_dir=None) -> TrainedModel:
    """The model that produced the run's test BLEU: its averaged checkpoints, vocabulary and settings."""
    run_dir = Path(run_dir)
    config, result = read_run(run_dir)
    t, d = config.train, config.data
    paths = [run_dir / rundir.CHECKPOINTS / rundir.checkpoint_name(s) for s in result["averaged_checkpoints"]]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise RunNotUsable(f"run {str(run_dir)!r} lacks the averaged checkpoint(s) {', '.join(missing)}")
    corpus = load_corpus(d.corpus, d.vocab, _data_dir(config, data_dir), d.direction)
    if corpus.fingerprint != result.get("corpus_fingerprint") or corpus.vocab_size != result.get("vocab_size"):
        raise RunNotUsable(
            f"run {str(run_dir)!r} was trained on corpus {result.get('corpus_fingerprint')} with "
            f"{result.get('vocab_size')} pieces, but {d.corpus} here is {corpus.fingerprint} with "
            f"{corpus.vocab_size}: give the --data-dir it was trained with"
        )
    if t.threads:
        torch.set_num_threads(t.threads)
    dev = resolve_device(device)
    states = [_checkpoint_weights(run_dir, p) for p in paths]
    model = build_model(config.model, corpus.vocab_size, PAD)
    try:
        model.load_state_dict(average_state_dicts(states))
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:  # shapes or names of another model
        why = _first(exc)
        raise RunNotUsable(f"run {str(run_dir)!r}: its checkpoints do not fit its config.json ({why})") from None
    set_residual_dtype(model, t.residual_dtype)  # decoded as it was evaluated: a bf16 stream under bf16 autocast
    model.to(dev).eval()
    processor = corpus.processor()
    known = frozenset(
        ch
        for i in range(processor.get_piece_size())
        if not (processor.is_control(i) or processor.is_unknown(i))
        for ch in processor.id_to_piece(i).replace("\u2581", "")
    )
    # the precision the run was evaluated with, where it is the same kind of device ("auto" measures the CPU anew)
    same = t.precision == "auto" and str(result.get("device", "")).split(":")[0] == dev.type
    precision = result["precision"] if same and result.get("precision") else resolve_precision(t.precision, dev)
    return TrainedModel(run_dir, config, result, model, processor, dev, precision, known)


def evaluate_run(run_dir, es: EvalSet, tracker: Optional[Tracker] = None, device: str = "auto", data_dir=None) -> dict:
    """Score a finished run on ``es`` (skipped when done), write evals/NAME.{json,hyp}, report to ``tracker``."""
    done = done_evaluation(run_dir, es)
    if done:
        return {**done, "status": "skipped"}
    start = time.perf_counter()
    tm = load_trained(run_dir, device, data_dir)
    scores, hyps = tm.score(es)
    json_path, hyp_path = eval_paths(run_dir, es.name)
    json_path.parent.mkdir(exist_ok=True)
    record = {
        "name": es.name,
        "set": es.origin,
        "fingerprint": es.fingerprint,
        "sentences": len(es),
        **scores,
        "config_hash": tm.result.get("config_hash"),
        "averaged_checkpoints": tm.result["averaged_checkpoints"],
        "beam": tm.config.train.beam,
        "alpha": tm.config.train.alpha,
        "beam_stop": tm.config.train.beam_stop,
        "device": str(tm.device),
        "precision": tm.precision,
        "seconds": round(time.perf_counter() - start, 2),
        "time": time.time(),
        "hyp": f"{rundir.EVALS}/{hyp_path.name}",
    }
    rundir.write_lines(hyp_path, hyps)
    rundir.write_json(json_path, record)  # last: its presence says the set is done
    if tracker:
        n = es.name
        metrics = {f"{n}_bleu": scores["bleu"], f"{n}_chrf": scores["chrf"], f"{n}_ppl": scores["ppl"]}
        metrics[f"{n}_unknown_chars"] = sum(scores["unknown_chars"].values())
        tracker.log_metrics(metrics, int(tm.result.get("steps", 0)))
        tracker.log_params(
            {
                f"{n}_fingerprint": es.fingerprint,
                f"{n}_sacrebleu_signature": scores["sacrebleu_signature"],
                f"{n}_chrf_signature": scores["chrf_signature"],
            }
        )
        tracker.log_artifact(str(json_path))
        tracker.log_artifact(str(hyp_path))
    return {**record, "status": "evaluated"}

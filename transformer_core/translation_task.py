"""The translation task (task=translation): the encoder-decoder on a parallel corpus, scored by dev
perplexity, beam-search BLEU and chrF (sacrebleu) on detokenised output.  A ``task.Task``."""

from __future__ import annotations

import math

from . import rundir
from .data import PAD, load_corpus
from .evaluation import bleu, chrf, perplexity, translate
from .model import build_model


class TranslationTask:
    name = "translation"
    tracked = ("dev_ppl", "dev_ce", "dev_bleu")  # logged at every evaluation (when not None), passed to progress
    artifacts = (rundir.RESULT, rundir.DEV_HYP, rundir.TEST_HYP, rundir.CONFIG, rundir.METRICS)

    def __init__(self, config):
        self.cfg = config

    def corpus(self, config):
        d = config.data
        return load_corpus(d.corpus, d.vocab, d.data_dir, d.direction)

    def model(self, config, vocab_size: int):
        return build_model(config.model, vocab_size, PAD)

    def inputs(self, batch) -> tuple:
        return batch.src, batch.tgt_in

    def versions(self) -> dict:
        import sacrebleu

        return {"sacrebleu_version": sacrebleu.__version__}

    def result_keys(self) -> dict:
        return {}

    def evaluate(self, tr) -> tuple[dict, dict[str, list[str]]]:
        """Dev perplexity over the whole dev set; beam-search BLEU too at the last step, and at every
        evaluation with eval_bleu "all" (on the first eval_sentences sentences)."""
        t = tr.cfg.train
        ppl = perplexity(tr.model, tr.dev, tr.device, tr.precision)
        ev = {"dev_ppl": ppl, "dev_ce": math.log(ppl), "dev_bleu": None, "dev_sentences": 0, "signature": None}
        last = tr.step == t.steps
        if not (last or t.eval_bleu == "all"):
            return ev, {}
        hyps = self._translate(tr, tr.dev, 0 if last else t.eval_sentences)
        score, signature = bleu(hyps, tr.dev.tgt_text[: len(hyps)])
        ev.update(dev_bleu=score, dev_sentences=len(hyps), signature=signature)
        return ev, {rundir.DEV_HYP: hyps}

    def _translate(self, tr, split, limit: int = 0) -> list[str]:
        t = tr.cfg.train
        processor = tr.corpus.processor()
        return translate(
            tr.model, split, processor, tr.device, tr.precision, t.beam, t.alpha, t.max_extra, limit, stop=t.beam_stop
        )

    def final(self, tr, averaged: list[int]) -> tuple[dict, dict, dict[str, list[str]]]:
        """Test BLEU, chrF and perplexity of the averaged model; dev chrF of the final model's dev.hyp."""
        test = tr.corpus.split("test")
        hyps = self._translate(tr, test)
        test_bleu, signature = bleu(hyps, test.tgt_text)
        test_chrf, chrf_signature = chrf(hyps, test.tgt_text)
        dev_hyps = (tr.workdir / rundir.DEV_HYP).read_text(encoding="utf-8").split("\n")[:-1]  # the final model's
        dev_chrf = chrf(dev_hyps, tr.dev.tgt_text)[0]
        test_ppl = perplexity(tr.model, test, tr.device, tr.precision)
        ev = tr.last_eval
        result = {
            "dev_bleu": ev["dev_bleu"],
            "dev_ppl": ev["dev_ppl"],
            "test_bleu": test_bleu,
            "test_ppl": test_ppl,
            "averaged_checkpoints": averaged,
            "sacrebleu_signature": signature,
            "dev_chrf": dev_chrf,
            "test_chrf": test_chrf,
            "chrf_signature": chrf_signature,
        }
        tracked = {"test_bleu": test_bleu, "test_chrf": test_chrf, "dev_chrf": dev_chrf, "test_ppl": test_ppl}
        files = {rundir.TEST_HYP: hyps, rundir.TEST_REF: test.tgt_text, rundir.DEV_REF: tr.dev.tgt_text}
        return result, tracked, files

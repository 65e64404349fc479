"""The language-model task (task=lm): a decoder-only stack (lm.py) on one side of a corpus
(data/monolingual.py), scored by per-token perplexity and bits per byte on dev and test; greedy samples
from test prompts in samples.txt.  A ``task.Task``.

The translation settings beam, alpha, max_extra, beam_stop, eval_sentences and eval_bleu are not used: every
evaluation scores the whole dev set.
"""

from __future__ import annotations

from . import rundir
from .config import check_lm_config
from .data.monolingual import lm_language, load_lm_corpus

SAMPLES = "samples.txt"  # greedy continuations of the first words of the first test lines, by the averaged model


def check(config) -> str:
    """The language modelled; a ConfigError in one line for a setting that makes no sense for task=lm."""
    check_lm_config(config.model)
    return lm_language(config.data.corpus, config.data.direction)


class LMTask:
    name = "lm"
    tracked = ("dev_ppl", "dev_ce", "dev_bpb")  # logged at every evaluation, passed to progress
    artifacts = (rundir.RESULT, SAMPLES, rundir.CONFIG, rundir.METRICS)

    def __init__(self, config):
        self.lang = check(config)

    def corpus(self, config):
        d = config.data
        return load_lm_corpus(d.corpus, d.vocab, d.data_dir, d.direction)

    def model(self, config, vocab_size: int):
        from .lm import build_lm  # torch: not for checking a spec

        return build_lm(config.model, vocab_size)

    def inputs(self, batch) -> tuple:
        return (batch.tgt_in,)  # BOS + pieces; the targets (pieces + EOS) are batch.tgt_out

    def versions(self) -> dict:
        import sentencepiece

        return {"sentencepiece_version": sentencepiece.__version__}

    def result_keys(self) -> dict:
        return {"task": self.name, "lang": self.lang}

    def evaluate(self, tr) -> tuple[dict, dict[str, list[str]]]:
        """Perplexity and bits per byte of the whole dev set (lm.score)."""
        from .lm import score

        s = score(tr.model, tr.dev, tr.device, tr.precision)
        return {"dev_ppl": s.ppl, "dev_ce": s.ce, "dev_bpb": s.bpb, "dev_tokens": s.tokens, "dev_bytes": s.bytes}, {}

    def final(self, tr, averaged: list[int]) -> tuple[dict, dict, dict[str, list[str]]]:
        """Test perplexity and bits per byte of the averaged model, and its samples; dev: the final model's."""
        from .lm import samples, score

        test = tr.corpus.split("test")
        s = score(tr.model, test, tr.device, tr.precision)
        ev = tr.last_eval
        result = {
            "dev_ppl": ev["dev_ppl"],
            "dev_bpb": ev["dev_bpb"],
            "test_ppl": s.ppl,
            "test_bpb": s.bpb,
            "averaged_checkpoints": averaged,
            "dev_tokens": ev["dev_tokens"],
            "dev_bytes": ev["dev_bytes"],
            "test_tokens": s.tokens,
            "test_bytes": s.bytes,
            "test_unk": s.unk,
        }
        lines = samples(tr.model, tr.corpus.processor(), test.tgt_text, tr.device)
        return result, {"test_ppl": s.ppl, "test_bpb": s.bpb}, {SAMPLES: lines}

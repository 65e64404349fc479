"""The statistics room: seed noise (seed_noise), the verdict engine (verdicts, evalues), "unstable" (stability),
the scale guard (scale), verdicts over the budget (trajectory), sentence-sampling significance (paired_bootstrap)
and what a search found (search, search_verdicts).  Built on analysis.data."""
